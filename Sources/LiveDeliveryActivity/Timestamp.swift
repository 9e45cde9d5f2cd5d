import Foundation
import LiveDeliveryTime

/// RFC 3339 timestamps as the worker reads them: written in UTC with milliseconds, read with the worker's own
/// rules (an offset required, `T`, `t` or a space between date and time, any number of fractional digits). Pure:
/// no calendar, locale or time zone, so a report decodes to the same instant everywhere.
enum Timestamp {
    /// `2026-11-21T10:04:05.250Z`: UTC, milliseconds (rounded down).
    static func format(_ date: Date) -> String {
        let micros = Int64((date.timeIntervalSince1970 * 1_000_000).rounded())
        var millis = micros / 1000
        if micros % 1000 < 0 { millis -= 1 }
        var seconds = millis / 1000
        var fraction = millis % 1000
        if fraction < 0 {
            fraction += 1000
            seconds -= 1
        }
        var days = seconds / 86_400
        var rest = seconds % 86_400
        if rest < 0 {
            rest += 86_400
            days -= 1
        }
        let (year, month, day) = RFC3339.civilFromDays(Int(days))
        func pad(_ value: Int64, _ width: Int) -> String {
            let text = String(value)
            return String(repeating: "0", count: max(0, width - text.count)) + text
        }
        return "\(pad(Int64(year), 4))-\(pad(Int64(month), 2))-\(pad(Int64(day), 2))T"
            + "\(pad(rest / 3600, 2)):\(pad(rest % 3600 / 60, 2)):\(pad(rest % 60, 2)).\(pad(fraction, 3))Z"
    }

    /// The instant the worker reads from `text`, or nil when the worker would refuse it (the worker's own parser).
    static func parse(_ text: String) -> Date? {
        guard (1...64).contains(text.count) else { return nil }
        return RFC3339.parse(text)
    }

    /// `date` as the worker will read it back from ``format(_:)``.
    static func normalized(_ date: Date) -> Date {
        parse(format(date)) ?? date
    }
}
