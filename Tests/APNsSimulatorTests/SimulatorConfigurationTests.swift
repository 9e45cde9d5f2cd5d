import Crypto
import Foundation
import Testing

@testable import APNsSimulator

@Suite("apns-sim configuration: keys and shapes")
struct SimulatorConfigurationTests {
    @Test func keyArgumentReadsPrivateOrPublicKeyPEM() throws {
        let key = try TestKey()
        let fromPrivate = try SimulatorConfiguration.AcceptedKey(argument: "\(key.keyID)=\(key.teamID):\(key.pemPath)")
        #expect(fromPrivate.keyID == key.keyID)
        #expect(fromPrivate.teamID == key.teamID)
        #expect(fromPrivate.publicKey.rawRepresentation == key.privateKey.publicKey.rawRepresentation)

        let publicPath = URL(fileURLWithPath: key.pemPath).deletingLastPathComponent().appendingPathComponent(
            "public.pem")
        try Data(key.privateKey.publicKey.pemRepresentation.utf8).write(to: publicPath)
        let fromPublic = try SimulatorConfiguration.AcceptedKey(argument: "K2=T2:\(publicPath.path)")
        #expect(fromPublic.publicKey.rawRepresentation == key.privateKey.publicKey.rawRepresentation)
    }

    @Test(arguments: ["KEY:path", "=TEAM:/x", "KEY=TEAM:", "KEY=TEAM:/does/not/exist.p8"])
    func badKeyArgumentsAreRefused(_ argument: String) {
        #expect(throws: SimulatorError.self) { try SimulatorConfiguration.AcceptedKey(argument: argument) }
    }

    @Test func shapeRoundTripsAndRejectsUnknownTypes() throws {
        let encoded = try JSONEncoder().encode(ContentStateShape.deliveryAttributes)
        #expect(try JSONDecoder().decode(ContentStateShape.self, from: encoded) == .deliveryAttributes)
        let optional = try JSONDecoder().decode(
            ContentStateShape.self, from: Data(#"{"contentState":{"note":"string?"}}"#.utf8))
        #expect(optional.contentState["note"] == .init(.string, optional: true))
        #expect(throws: (any Error).self) {
            try JSONDecoder().decode(ContentStateShape.self, from: Data(#"{"contentState":{"x":"uuid"}}"#.utf8))
        }
    }
}

@Suite("apns-sim's JSON parser agrees with JSONSerialization")
struct JSONParsingTests {
    @Test(arguments: [
        #"{"aps":{"event":"update","timestamp":1790000000,"content-state":{"a":[1,2.5,-3e2],"b":null,"c":true}}}"#,
        #"{"s":"esc \" \\ \/ \n \t \u00e9 \ud83d\ude00 ünï"}"#, #"[]"#, #"{}"#, #" [ 0 , -0.5 , 1E+3 ] "#, #""x""#,
    ])
    func parsesValidJSON(_ text: String) throws {
        let parsed = try #require(JSONValue.parse(Array(text.utf8)))
        let reference = try JSONDecoder().decode(JSONValue.self, from: Data(text.utf8))
        #expect(parsed == reference)
    }

    @Test(arguments: [
        "", "{", #"{"a":}"#, #"{"a" 1}"#, "[1,]", "01", "1.", "-", #""\x""#, "tru", #"{"a":1} x"#, "\"a\u{01}\"",
        #""\udc00""#,
    ])
    func refusesInvalidJSON(_ text: String) {
        #expect(JSONValue.parse(Array(text.utf8)) == nil)
    }
}
