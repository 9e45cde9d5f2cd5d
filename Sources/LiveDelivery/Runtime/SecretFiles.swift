import Configuration
import Foundation

/// Secrets the container way: every secret key's environment variable has a `…_FILE` twin naming a file
/// that holds the value (`LIVEDELIVERY_POSTGRES_URL_FILE=/run/secrets/postgres_url`), as the official
/// PostgreSQL and RabbitMQ images read theirs and as Docker and Kubernetes mount secrets.
///
/// The file's text is the value, without its trailing line break; a list key (`amqp.urls`) takes one entry
/// per line or the environment's comma-separated form. Problems name the variable and the file's path,
/// never what the file holds.
enum SecretFiles {
    /// Where the reader keeps each secret's source (an internal key; `check-config` shows it).
    static let sourcePrefix = "internal.source."

    /// Moves the value of `key`'s `…_FILE` file into `environment` under the key's own variable, and returns
    /// where the value the reader will use comes from: a flag, the environment, or the file; nil when none
    /// of them (livedelivery.json, or unset).
    static func resolve(
        _ key: ConfigurationKey, flags: [String: String], environment: inout [String: String]
    ) throws(LiveDeliveryError) -> String? {
        let variable = key.environmentVariable
        let fileVariable = variable + "_FILE"
        let path = environment[fileVariable].flatMap { $0.isEmpty ? nil : $0 }
        if let path {
            guard environment[variable] == nil else {
                throw LiveDeliveryError(
                    .invalidConfiguration,
                    "\(key.name): both \(variable) and \(fileVariable) are set; set one of them")
            }
            environment[variable] = try read(path, variable: fileVariable, list: key.isList)
        }
        if flags[variable] != nil { return "a command-line flag" }
        if let path { return "the file \(fileVariable) names, \(path)" }
        if environment[variable] != nil { return "environment \(variable)" }
        return nil
    }

    /// The environment variables of `cells.<name>.postgresUrl` (`LIVEDELIVERY_CELLS_<NAME>_POSTGRES_URL`), which
    /// no table declares: each is secret, and its `…_FILE` twin is read into it as a declared key's is.
    /// Returns the variables, to be treated as secrets.
    static func resolveCells(environment: inout [String: String]) throws(LiveDeliveryError) -> Set<String> {
        let (prefix, suffix) = ("LIVEDELIVERY_CELLS_", "_POSTGRES_URL")
        var variables: Set<String> = []
        for name in environment.keys.sorted() where name.hasPrefix(prefix) {
            let variable = name.hasSuffix(suffix + "_FILE") ? String(name.dropLast("_FILE".count)) : name
            guard variable.hasSuffix(suffix), variable.count > prefix.count + suffix.count else { continue }
            variables.insert(variable)
            guard name != variable, let path = environment[name].flatMap({ $0.isEmpty ? nil : $0 }) else { continue }
            guard environment[variable] == nil else {
                throw LiveDeliveryError(
                    .invalidConfiguration, "both \(variable) and \(name) are set; set one of them")
            }
            environment[variable] = try read(path, variable: name, list: false)
        }
        return variables
    }

    /// The value's source after loading: the one ``resolve(_:flags:environment:)`` recorded, else
    /// livedelivery.json when the key has a value there.
    static func source(of key: ConfigurationKey, in config: ConfigReader) -> String? {
        if let recorded = config.string(forKey: ConfigKey(sourcePrefix + key.name)) { return recorded }
        let present =
            key.isList
            ? config.stringArray(forKey: ConfigKey(key.name), isSecret: true)?.isEmpty == false
            : config.string(forKey: ConfigKey(key.name), isSecret: true)?.isEmpty == false
        return present ? WorkerConfiguration.fileName : nil
    }

    private static func read(_ path: String, variable: String, list: Bool) throws(LiveDeliveryError) -> String {
        guard let data = FileManager.default.contents(atPath: path) else {
            let reason = FileManager.default.fileExists(atPath: path) ? "cannot read it (permissions?)" : "no such file"
            throw LiveDeliveryError(.invalidConfiguration, "\(variable): \(path): \(reason)")
        }
        guard let text = String(data: data, encoding: .utf8) else {
            throw LiveDeliveryError(.invalidConfiguration, "\(variable): \(path): not UTF-8 text")
        }
        let lines = text.split(whereSeparator: \.isNewline).map { $0.trimmingCharacters(in: .whitespaces) }
            .filter { !$0.isEmpty }
        guard !lines.isEmpty else {
            throw LiveDeliveryError(.invalidConfiguration, "\(variable): \(path) is empty")
        }
        guard list || lines.count == 1 else {
            // A connection string or URL is one line; a second one is a mistake (or two secrets in one file).
            throw LiveDeliveryError(
                .invalidConfiguration, "\(variable): \(path) holds \(lines.count) lines; the value is one line")
        }
        return lines.joined(separator: ",")
    }
}

extension ConfigurationKey {
    var isList: Bool {
        if case .list = values { return true }
        return false
    }
}
