import LiveDeliveryJSON

extension Policy {
    /// Reads `policy.json`: every key is optional and overrides the default of ``Policy/init()``.
    ///
    /// ## Configuration keys
    /// - `statuses.<status>.step` (string): the delivery moment; alerts at most once per step
    /// - `statuses.<status>.relevance` (number ≥ 0): `relevance-score`
    /// - `statuses.<status>.alert` (bool): reaching this step alerts
    /// - `statuses.<status>.essential` (bool): keeps priority 10 when the budget is spent
    /// - `statuses.<status>.texts` (array of templates): alert texts, first fillable wins
    /// - `statuses.<status>.dismissAfterSeconds` (0…14400, terminal statuses only)
    /// - `startOn` (array of non-terminal statuses): statuses that may start an activity remotely
    /// - `alerts.sound` (string; `""` for silent), `alerts.maxPerActivity` (int),
    ///   `alerts.startFallback` (template without placeholders),
    ///   `alerts.etaSlip.thresholdSeconds` (number), `alerts.etaSlip.texts` (templates)
    /// - `budget.priority10PerHour` (int)
    /// - `staleDate.afterETASeconds`, `staleDate.withoutETASeconds`, `staleDate.minimumAheadSeconds`
    /// - `expiration.startSeconds`, `expiration.updateSeconds`, `expiration.endSeconds`
    /// - `sweep.lifetimeSeconds` (≤ 28800), `sweep.lifetimeMarginSeconds`, `sweep.idleSeconds`,
    ///   `sweep.adoptionTimeoutSeconds` (10 … 28800), `sweep.dismissAfterSeconds` (≤ 14400)
    /// - `payload.maxBytes` (256…4096), `payload.inputPushToken` (bool)
    /// - `broadcast.minimumFollowers` (0…20; 0: no channels), `broadcast.messageStoragePolicy`
    ///   (`most_recent` | `none`), `broadcast.channelLimit` (1…10000), `broadcast.channelHeadroom`
    ///
    /// A template is `{"title": T, "subtitle": T, "body": T}` (title required), where T is a string
    /// or `{"locKey": "KEY", "locArgs": ["{courier}"]}`; see ``AlertTemplate`` for placeholders.
    package static func decode(_ bytes: [UInt8], file: String = "policy.json") throws(LiveDeliveryCoreError) -> Policy {
        let reader = ConfigurationReader(file: file)
        var policy = Policy()
        if let root = reader.parse(bytes) {
            policy.read(root, reader)
        }
        guard reader.problems.isEmpty else {
            throw LiveDeliveryCoreError(code: .invalidConfiguration, problems: reader.problems)
        }
        return policy
    }

    /// Reads each top-level section in turn, in the order of the key list above.
    private mutating func read(_ root: JSONObject, _ r: ConfigurationReader) {
        r.checkKeys(
            root, at: "",
            known: [
                "statuses", "startOn", "alerts", "budget", "staleDate", "expiration", "sweep", "payload", "broadcast",
                "comment",
            ])
        if let table = r.object(root, "statuses", at: "") { readStatuses(table, r) }
        for status in OrderStatus.terminal where rule(for: status).dismissAfter == nil {
            statuses[status]?.dismissAfter = 1800
        }
        if let list = r.array(root, "startOn", at: "") { startOn = Self.startOn(list, r) }
        if let alerts = r.object(root, "alerts", at: "") { readAlerts(alerts, r) }
        if let budget = r.object(root, "budget", at: "") { readBudget(budget, r) }
        if let stale = r.object(root, "staleDate", at: "") { readStaleDate(stale, r) }
        if let expiration = r.object(root, "expiration", at: "") { readExpiration(expiration, r) }
        if let object = r.object(root, "sweep", at: "") { readSweep(object, r) }
        if let payload = r.object(root, "payload", at: "") { readPayload(payload, r) }
        if let object = r.object(root, "broadcast", at: "") { readBroadcast(object, r) }
    }

    /// `statuses`: for each known status, its rule with the keys given replacing the default's.
    private mutating func readStatuses(_ table: JSONObject, _ r: ConfigurationReader) {
        for key in table.keys {
            let path = "statuses.\(key)"
            let status = OrderStatus(rawValue: key)
            guard status.isKnown else {
                r.problem(path, "unknown status (known: \(OrderStatus.known.map(\.rawValue).joined(separator: ", ")))")
                continue
            }
            guard let object = r.object(table, key, at: "statuses") else { continue }
            statuses[status] = Self.statusRule(object, at: path, for: status, over: rule(for: status), r)
        }
    }

    /// One `statuses.<status>` object read over `rule`.
    private static func statusRule(
        _ object: JSONObject, at path: String, for status: OrderStatus, over rule: StatusRule, _ r: ConfigurationReader
    ) -> StatusRule {
        r.checkKeys(
            object, at: path,
            known: ["step", "relevance", "alert", "essential", "texts", "dismissAfterSeconds"])
        var rule = rule
        if let step = r.string(object, "step", at: path) {
            if step.isEmpty { r.problem("\(path).step", "must not be empty") } else { rule.step = step }
        }
        if let relevance = r.number(object, "relevance", at: path, in: 0...10_000) {
            rule.relevance = relevance
        }
        if let alert = r.bool(object, "alert", at: path) { rule.alert = alert }
        if let essential = r.bool(object, "essential", at: path) { rule.essential = essential }
        if let texts = templates(object, "texts", at: path, r) { rule.texts = texts }
        if object["dismissAfterSeconds"] != nil, !status.isTerminal {
            r.problem("\(path).dismissAfterSeconds", "only terminal statuses end an activity")
        } else if let seconds = r.number(object, "dismissAfterSeconds", at: path, in: 0...14_400) {
            rule.dismissAfter = seconds
        }
        return rule
    }

    /// `startOn`: known, non-terminal statuses (a terminal one is reported, and kept).
    private static func startOn(_ list: [JSONValue], _ r: ConfigurationReader) -> Set<OrderStatus> {
        var set = Set<OrderStatus>()
        for (index, item) in list.enumerated() {
            guard case .string(let text) = item, OrderStatus(rawValue: text).isKnown else {
                r.problem("startOn[\(index)]", "must be a known status")
                continue
            }
            let status = OrderStatus(rawValue: text)
            if status.isTerminal {
                r.problem("startOn[\(index)]", "'\(text)' is terminal; an activity cannot start at the end")
            }
            set.insert(status)
        }
        return set
    }

    /// `alerts`: sound, cap, the start fallback and `alerts.etaSlip`.
    private mutating func readAlerts(_ alerts: JSONObject, _ r: ConfigurationReader) {
        r.checkKeys(alerts, at: "alerts", known: ["sound", "maxPerActivity", "startFallback", "etaSlip"])
        if let sound = r.string(alerts, "sound", at: "alerts") { alertSound = sound.isEmpty ? nil : sound }
        if let cap = r.integer(alerts, "maxPerActivity", at: "alerts", in: 0...100) { alertCap = cap }
        if let value = alerts["startFallback"] {
            if let template = Self.template(value, at: "alerts.startFallback", r) {
                if !template.usedPlaceholders.isEmpty {
                    r.problem("alerts.startFallback", "must not use placeholders (it is the last resort)")
                }
                startFallback = template
            }
        }
        if let slip = r.object(alerts, "etaSlip", at: "alerts") { readETASlip(slip, r) }
    }

    /// `alerts.etaSlip`: when a later ETA alerts, and with which texts.
    private mutating func readETASlip(_ slip: JSONObject, _ r: ConfigurationReader) {
        r.checkKeys(slip, at: "alerts.etaSlip", known: ["thresholdSeconds", "texts"])
        if let threshold = r.number(slip, "thresholdSeconds", at: "alerts.etaSlip", in: 0...86_400) {
            etaSlipThreshold = threshold
        }
        if let texts = Self.templates(slip, "texts", at: "alerts.etaSlip", r) { etaSlipTexts = texts }
    }

    /// `budget`: priority-10 pushes per hour, without and with frequent updates.
    private mutating func readBudget(_ budget: JSONObject, _ r: ConfigurationReader) {
        r.checkKeys(budget, at: "budget", known: ["priority10PerHour", "frequentPriority10PerHour"])
        if let value = r.integer(budget, "priority10PerHour", at: "budget", in: 0...3600) {
            priority10PerHour = value
        }
        if let value = r.integer(budget, "frequentPriority10PerHour", at: "budget", in: 0...3600) {
            frequentPriority10PerHour = value
        }
    }

    /// `staleDate`: how far ahead `stale-date` is set.
    private mutating func readStaleDate(_ stale: JSONObject, _ r: ConfigurationReader) {
        r.checkKeys(stale, at: "staleDate", known: ["afterETASeconds", "withoutETASeconds", "minimumAheadSeconds"])
        if let v = r.number(stale, "afterETASeconds", at: "staleDate", in: 0...28_800) { staleAfterETA = v }
        if let v = r.number(stale, "withoutETASeconds", at: "staleDate", in: 60...28_800) { staleWithoutETA = v }
        if let v = r.number(stale, "minimumAheadSeconds", at: "staleDate", in: 0...28_800) { staleMinimumAhead = v }
    }

    /// `expiration`: `apns-expiration` per push kind.
    private mutating func readExpiration(_ expiration: JSONObject, _ r: ConfigurationReader) {
        r.checkKeys(expiration, at: "expiration", known: ["startSeconds", "updateSeconds", "endSeconds"])
        if let v = r.number(expiration, "startSeconds", at: "expiration", in: 0...86_400) { startExpiration = v }
        if let v = r.number(expiration, "updateSeconds", at: "expiration", in: 0...86_400) { updateExpiration = v }
        if let v = r.number(expiration, "endSeconds", at: "expiration", in: 0...86_400) { endExpiration = v }
    }

    /// `sweep`: the sweeper's thresholds; the margin must stay under the lifetime.
    private mutating func readSweep(_ object: JSONObject, _ r: ConfigurationReader) {
        r.checkKeys(
            object, at: "sweep",
            known: [
                "lifetimeSeconds", "lifetimeMarginSeconds", "idleSeconds", "adoptionTimeoutSeconds",
                "dismissAfterSeconds",
            ])
        if let v = r.number(object, "lifetimeSeconds", at: "sweep", in: 600...28_800) { sweep.lifetime = v }
        if let v = r.number(object, "lifetimeMarginSeconds", at: "sweep", in: 0...14_400) {
            sweep.lifetimeMargin = v
        }
        if let v = r.number(object, "idleSeconds", at: "sweep", in: 10...86_400) { sweep.idleTimeout = v }
        if let v = r.number(object, "adoptionTimeoutSeconds", at: "sweep", in: 10...28_800) {
            sweep.adoptionTimeout = v
        }
        if let v = r.number(object, "dismissAfterSeconds", at: "sweep", in: 0...14_400) { sweep.dismissAfter = v }
        if sweep.lifetimeMargin >= sweep.lifetime {
            r.problem("sweep.lifetimeMarginSeconds", "must be smaller than sweep.lifetimeSeconds")
        }
    }

    /// `payload`: the size limit and `input-push-token`.
    private mutating func readPayload(_ payload: JSONObject, _ r: ConfigurationReader) {
        r.checkKeys(payload, at: "payload", known: ["maxBytes", "inputPushToken"])
        if let v = r.integer(payload, "maxBytes", at: "payload", in: 256...4096) { maxPayloadBytes = v }
        if let v = r.bool(payload, "inputPushToken", at: "payload") { inputPushToken = v }
    }

    /// `broadcast`: when an order gets a channel, and the channels' settings.
    private mutating func readBroadcast(_ object: JSONObject, _ r: ConfigurationReader) {
        r.checkKeys(
            object, at: "broadcast",
            known: ["minimumFollowers", "messageStoragePolicy", "channelLimit", "channelHeadroom"])
        if let v = r.integer(object, "minimumFollowers", at: "broadcast", in: 0...OrderState.maxFollowers) {
            broadcast.minimumFollowers = v
        }
        if let v = r.string(object, "messageStoragePolicy", at: "broadcast") {
            switch v {
            case "most_recent": broadcast.storeMostRecent = true
            case "none": broadcast.storeMostRecent = false
            default: r.problem("broadcast.messageStoragePolicy", "must be \"most_recent\" or \"none\"")
            }
        }
        if let v = r.integer(object, "channelLimit", at: "broadcast", in: 1...10_000) { broadcast.channelLimit = v }
        if let v = r.integer(object, "channelHeadroom", at: "broadcast", in: 0...10_000) {
            broadcast.channelHeadroom = v
        }
    }

    private static func templates(
        _ object: JSONObject, _ key: String, at path: String, _ r: ConfigurationReader
    ) -> [AlertTemplate]? {
        guard let list = r.array(object, key, at: path) else { return nil }
        return list.enumerated().compactMap { index, value in template(value, at: "\(path).\(key)[\(index)]", r) }
    }

    private static func template(_ value: JSONValue, at path: String, _ r: ConfigurationReader) -> AlertTemplate? {
        guard case .object(let object) = value else {
            r.problem(path, "must be an object with a title")
            return nil
        }
        r.checkKeys(object, at: path, known: ["title", "subtitle", "body"])
        func text(_ key: String) -> AlertTemplate.Text? {
            let textPath = "\(path).\(key)"
            switch object[key] {
            case .none, .null?: return nil
            case .string(let string)?:
                return string.isEmpty ? nil : .plain(string)
            case .object(let loc)?:
                r.checkKeys(loc, at: textPath, known: ["locKey", "locArgs"])
                guard case .string(let locKey)? = loc["locKey"], !locKey.isEmpty else {
                    r.problem(textPath, "a localised text needs a non-empty locKey")
                    return nil
                }
                var args: [String] = []
                if let list = r.array(loc, "locArgs", at: textPath) {
                    for (index, arg) in list.enumerated() {
                        guard case .string(let string) = arg else {
                            r.problem("\(textPath).locArgs[\(index)]", "must be a string")
                            continue
                        }
                        args.append(string)
                    }
                }
                return .localized(key: locKey, args: args)
            case let other?:
                r.problem(textPath, "must be a string or {\"locKey\", \"locArgs\"}, not \(other.typeName)")
                return nil
            }
        }
        guard let title = text("title") else {
            switch object["title"] {
            case .none, .null?, .string("")?: r.problem(path, "needs a non-empty title")
            default: break  // wrong type, already reported
            }
            return nil
        }
        let template = AlertTemplate(title: title, subtitle: text("subtitle"), body: text("body"))
        for name in template.usedPlaceholders.sorted() where !AlertTemplate.placeholders.contains(name) {
            r.problem(
                path,
                "unknown placeholder '{\(name)}' (known: \(AlertTemplate.placeholders.map { "{\($0)}" }.joined(separator: ", ")))"
            )
        }
        return template
    }
}
