import Foundation
import LiveDeliveryActivity
import LiveDeliveryJSON
import Testing

@testable import LiveDeliveryCore

@Suite("Configuration")
struct ConfigurationTests {
    @Test func shippedPolicyEqualsTheBuiltInDefaults() throws {
        let policy = try Policy.decode(Fixtures.bytes("Config/policy.json"))
        #expect(policy == Policy())
    }

    @Test func shippedMappingTargetsDeliveryAttributes() {
        let mapping = Fixtures.configuration.mapping
        #expect(mapping.attributesType == "DeliveryAttributes")
        #expect(mapping.attributes.map(\.name) == ["orderNumber", "restaurantName"])
        #expect(mapping.contentState.map(\.name) == ["driverName", "estimatedDeliveryTime", "currentStep"])
        let step = mapping.contentState[2]
        #expect(Set(step.cases ?? []) == Set(DeliveryStep.allCases.map(\.rawValue)))
    }

    @Test func aMissingPolicyFileMeansDefaults() throws {
        let configuration = try DefaultConfiguration.load(
            policyJSON: nil, mappingJSON: Fixtures.bytes("Config/content-mapping.json"))
        #expect(configuration.policy == Policy())
    }

    static func mappingProblems(_ change: (inout [String: Any]) -> Void) -> [String] {
        var root =
            (try? JSONSerialization.jsonObject(with: Data(Fixtures.bytes("Config/content-mapping.json"))))
            as? [String: Any]
            ?? [:]
        change(&root)
        let bytes = Array((try? JSONSerialization.data(withJSONObject: root)) ?? Data())
        do {
            _ = try ContentMapping.decode(bytes)
            return []
        } catch {
            return error.problems
        }
    }

    static func editField(
        _ section: String, _ index: Int, _ change: @escaping (inout [String: Any]) -> Void
    )
        -> (inout [String: Any]) -> Void
    {
        { root in
            var fields = root[section] as! [[String: Any]]
            change(&fields[index])
            root[section] = fields
        }
    }

    @Test func unknownSourceNamesTheFieldAndListsTheKnownSources() {
        let problems = Self.mappingProblems(Self.editField("contentState", 0) { $0["source"] = "courier.nam" })
        #expect(problems.count == 1)
        #expect(
            problems.first?.hasPrefix(
                "content-mapping.json: contentState.driverName: unknown source 'courier.nam' (known: order.order_id,")
                == true)
        #expect(problems.first?.contains("courier.name") == true)
    }

    @Test(
        arguments: [
            (
                "missing default", "contentState", 0, "driverName", #"{"default": null}"#,
                "non-optional field needs a default"
            ),
            (
                "wrong type for source", "contentState", 0, "driverName", #"{"type": "int"}"#,
                "cannot fill a field of type int"
            ),
            ("unknown type", "contentState", 0, "driverName", #"{"type": "text"}"#, "unknown type 'text'"),
            ("typo in key", "contentState", 0, "driverName", #"{"sorce": "x"}"#, "sorce: unknown key"),
            ("default of the wrong type", "attributes", 0, "orderNumber", #"{"default": "0"}"#, "must be an integer"),
            (
                "bad date range default", "contentState", 1, "estimatedDeliveryTime",
                #"{"default": {"secondsAfterUpdate": 60}}"#, #"must be {"secondsAfterUpdate": [a, b]}"#
            ),
            (
                "enum table incomplete", "contentState", 2, "currentStep", #"{"values": {"placed": "confirmed"}}"#,
                "has no entry for confirmed"
            ),
            (
                "bad date encoding", "contentState", 1, "estimatedDeliveryTime", #"{"dateEncoding": "iso8601"}"#,
                "unknown encoding 'iso8601'"
            ),
        ])
    func mappingErrorsAreClear(
        _ name: String, _ section: String, _ index: Int, _ field: String, _ patchJSON: String, _ expected: String
    ) throws {
        let patch = try #require(try JSONSerialization.jsonObject(with: Data(patchJSON.utf8)) as? [String: Any])
        let problems = Self.mappingProblems(
            Self.editField(section, index) { object in
                for (key, value) in patch {
                    if value is NSNull { object[key] = nil } else { object[key] = value }
                }
            })
        #expect(
            problems.contains { $0.contains("\(section).\(field)") && $0.contains(expected) }, "\(name): \(problems)")
    }

    @Test func enumCasesAreCheckedAgainstTheApp() {
        let problems = Self.mappingProblems(
            Self.editField("contentState", 2) { object in
                var values = object["values"] as! [String: Any]
                values["arriving"] = "nearby"
                object["values"] = values
            })
        #expect(
            problems == [
                "content-mapping.json: contentState.currentStep.values.arriving: 'nearby' is not one of the cases (confirmed, preparing, pickedUp, delivering, delivered)"
            ])
    }

    @Test func structuralMappingErrors() {
        #expect(
            Self.mappingProblems { $0["attributesType"] = nil }.contains { $0.contains("attributesType: is required") })
        #expect(Self.mappingProblems { $0["contentState"] = nil }.contains { $0.contains("contentState: is required") })
        var duplicate = Self.mappingProblems { root in
            var fields = root["attributes"] as! [[String: Any]]
            fields.append(fields[0])
            root["attributes"] = fields
        }
        #expect(duplicate.contains { $0.contains("attributes.orderNumber: is declared twice") })
        duplicate = []
        do {
            _ = try ContentMapping.decode(Array("not json".utf8))
        } catch {
            #expect(error.description.contains("content-mapping.json: not valid JSON"))
        }
    }

    static func policyProblems(_ json: String) -> [String] {
        do {
            _ = try Policy.decode(Array(json.utf8))
            return []
        } catch {
            return error.problems
        }
    }

    @Test(
        arguments: [
            (#"{"statuses": {"lost": {}}}"#, "policy.json: statuses.lost: unknown status"),
            (#"{"statuses": {"placed": {"relevance": -1}}}"#, "statuses.placed.relevance: must be between 0 and 10000"),
            (#"{"statuses": {"placed": {"dismissAfterSeconds": 60}}}"#, "only terminal statuses end an activity"),
            (
                #"{"statuses": {"delivered": {"dismissAfterSeconds": 20000}}}"#,
                "dismissAfterSeconds: must be between 0 and 14400"
            ),
            (
                #"{"statuses": {"arriving": {"texts": [{"title": "{driver} is here"}]}}}"#,
                "unknown placeholder '{driver}'"
            ),
            (#"{"statuses": {"arriving": {"texts": [{"body": "no title"}]}}}"#, "needs a non-empty title"),
            (#"{"startOn": ["delivered"]}"#, "'delivered' is terminal"),
            (#"{"alerts": {"startFallback": {"title": "Hi {courier}"}}}"#, "must not use placeholders"),
            (#"{"payload": {"maxBytes": 5000}}"#, "payload.maxBytes: must be between 256 and 4096"),
            (#"{"budget": {"priority10PerHour": "six"}}"#, "budget.priority10PerHour: must be an integer"),
            (#"{"sweep": {"lifetimeSeconds": 36000}}"#, "sweep.lifetimeSeconds: must be between 600 and 28800"),
            (#"{"alerts": {"maxPerActivty": 3}}"#, "alerts.maxPerActivty: unknown key"),
            (#"[1]"#, "the top level must be an object"),
        ])
    func policyErrorsAreClear(_ json: String, _ expected: String) {
        let problems = Self.policyProblems(json)
        #expect(problems.contains { $0.contains(expected) }, "\(problems)")
    }

    @Test func policyOverridesOnlyWhatItNames() throws {
        let policy = try Policy.decode(
            Array(
                #"{"statuses": {"arriving": {"relevance": 90, "texts": [{"title": {"locKey": "ARRIVING", "locArgs": ["{courier}"]}}]}}, "budget": {"priority10PerHour": 2}}"#
                    .utf8))
        #expect(policy.rule(for: .arriving).relevance == 90)
        #expect(
            policy.rule(for: .arriving).texts == [
                AlertTemplate(title: .localized(key: "ARRIVING", args: ["{courier}"]))
            ])
        #expect(policy.rule(for: .arriving).essential)
        #expect(policy.priority10PerHour == 2)
        #expect(policy.rule(for: .delivered) == Policy().rule(for: .delivered))
    }

    @Test func bothFilesReportTogether() {
        do {
            _ = try DefaultConfiguration.load(policyJSON: Array("{\"budget\": 1}".utf8), mappingJSON: Array("{}".utf8))
            Issue.record("accepted")
        } catch {
            #expect(error.problems.contains { $0.hasPrefix("policy.json: budget") })
            #expect(error.problems.contains { $0.hasPrefix("content-mapping.json: attributesType") })
            #expect(!error.isRetriable)
        }
    }
}
