import Foundation

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// CPU time of processes that are not this one's children: the local PostgreSQL and RabbitMQ servers,
/// whose share of a benchmark's machine time is otherwise only a guess. Read from `/proc` (Linux); zero
/// where there is none.
package enum ProcessCPU {
    /// User and system seconds of every process whose command name (`comm`, as `ps -o comm` shows it) is
    /// one of `names`, each with what it has collected from its children that ended.
    ///
    /// Two readings subtract correctly when processes start or end between them, as long as the one that
    /// reaps an ended process is counted too: a PostgreSQL backend that exits moves its time into the
    /// postmaster's children's time, and a backend that was not there at the first reading started at
    /// zero.
    package static func seconds(ofCommands names: Set<String>) -> Double {
        seconds(ofGroups: [names])[0]
    }

    /// ``seconds(ofCommands:)`` for several groups of command names at once, in one pass over `/proc`.
    package static func seconds(ofGroups groups: [Set<String>]) -> [Double] {
        var ticks = [Double](repeating: 0, count: groups.count)
        guard let entries = try? FileManager.default.contentsOfDirectory(atPath: "/proc") else { return ticks }
        for entry in entries where entry.utf8.allSatisfy({ $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }) {
            guard let stat = Stat(path: "/proc/\(entry)/stat"),
                let group = groups.firstIndex(where: { $0.contains(stat.command) })
            else { continue }
            ticks[group] += stat.own + stat.children
        }
        return ticks.map { $0 / clockTicksPerSecond }
    }

    /// User and system seconds of this process, without its children's.
    package static var ownSeconds: Double { ownSeconds(path: "/proc/self/stat") ?? 0 }

    /// User and system seconds of process `pid`, without its children's; nil once it is gone.
    static func ownSeconds(pid: Int32) -> Double? { ownSeconds(path: "/proc/\(pid)/stat") }

    private static func ownSeconds(path: String) -> Double? {
        Stat(path: path).map { $0.own / clockTicksPerSecond }
    }

    private static var clockTicksPerSecond: Double { Double(sysconf(Int32(_SC_CLK_TCK))) }

    /// The fields of `/proc/<pid>/stat` used here, in clock ticks.
    private struct Stat {
        var command: String
        var own: Double
        var children: Double

        init?(path: String) {
            guard let text = try? String(contentsOfFile: path, encoding: .utf8),
                let open = text.firstIndex(of: "("), let close = text.lastIndex(of: ")")
            else { return nil }
            // "pid (comm) state …": after the command name, utime, stime, cutime and cstime are the 12th
            // to 15th fields (fields 14 to 17 of proc(5)).
            let fields = text[text.index(after: close)...].split(separator: " ")
            guard fields.count > 14, let user = Double(fields[11]), let system = Double(fields[12]),
                let childUser = Double(fields[13]), let childSystem = Double(fields[14])
            else { return nil }
            command = String(text[text.index(after: open)..<close])
            own = user + system
            children = childUser + childSystem
        }
    }
}
