package import Foundation

/// RFC 3339 timestamps, parsed and formatted without calendars, locales or time zones (pure and
/// deterministic on every platform).
package enum RFC3339 {
    /// Parses `2026-11-21T10:04:05Z`, `2026-11-21T10:04:05.250+02:00` (`T`/`t`/space, `Z`/`z`).
    /// An offset is required; fractional seconds are allowed (any number of digits); a leap second
    /// (`:60`) counts as the next second. Returns nil for anything else, including impossible dates.
    package static func parse(_ text: String) -> Date? {
        var text = text
        return text.withUTF8 { parse(bytes: $0) }
    }

    /// As ``parse(_:)``, from the text's UTF-8 bytes: an event's timestamps are read where its JSON lies,
    /// with no `String` made for them.
    package static func parse(bytes b: UnsafeBufferPointer<UInt8>) -> Date? {
        var i = 0
        func digits(_ count: Int) -> Int? {
            guard i + count <= b.count else { return nil }
            var value = 0
            for k in 0..<count {
                let c = b[i + k]
                guard c >= 48, c <= 57 else { return nil }
                value = value * 10 + Int(c - 48)
            }
            i += count
            return value
        }
        /// One of up to three bytes.
        func expect(_ first: Unicode.Scalar, _ second: Unicode.Scalar? = nil, _ third: Unicode.Scalar? = nil) -> Bool {
            guard i < b.count else { return false }
            let byte = b[i]
            guard
                byte == UInt8(ascii: first) || second.map({ byte == UInt8(ascii: $0) }) == true
                    || third.map({ byte == UInt8(ascii: $0) }) == true
            else { return false }
            i += 1
            return true
        }
        guard let year = digits(4), expect("-"), let month = digits(2), expect("-"), let day = digits(2),
            expect("T", "t", " "), let hour = digits(2), expect(":"), let minute = digits(2), expect(":"),
            let second = digits(2)
        else { return nil }
        guard (1...12).contains(month), day >= 1, day <= daysInMonth(year: year, month: month),
            hour <= 23, minute <= 59, second <= 60
        else { return nil }
        var fraction = 0.0
        if i < b.count, b[i] == UInt8(ascii: ".") {
            i += 1
            var scale = 0.1
            let start = i
            while i < b.count, b[i] >= 48, b[i] <= 57 {
                fraction += Double(b[i] - 48) * scale
                scale /= 10
                i += 1
            }
            guard i > start else { return nil }
        }
        var offset = 0
        guard i < b.count else { return nil }
        if expect("Z", "z") {
            offset = 0
        } else if b[i] == UInt8(ascii: "+") || b[i] == UInt8(ascii: "-") {
            let sign = b[i] == UInt8(ascii: "-") ? -1 : 1
            i += 1
            guard let oh = digits(2), expect(":"), let om = digits(2), oh <= 23, om <= 59 else { return nil }
            offset = sign * (oh * 3600 + om * 60)
        } else {
            return nil
        }
        guard i == b.count else { return nil }
        let days = daysFromCivil(year: year, month: month, day: day)
        let seconds = days * 86_400 + hour * 3600 + minute * 60 + second - offset
        return Date(timeIntervalSince1970: Double(seconds) + fraction)
    }

    /// Formats as `2026-11-21T10:04:05Z` (UTC, whole seconds, rounded down); with
    /// `fractional: true` adds milliseconds when the date has any.
    package static func format(_ date: Date, fractional: Bool = false) -> String {
        let interval = date.timeIntervalSince1970
        let whole = interval.rounded(.down)
        let total = Int(whole)
        var days = total / 86_400
        var rest = total % 86_400
        if rest < 0 {
            rest += 86_400
            days -= 1
        }
        let (y, m, d) = civilFromDays(days)
        // Written into one small buffer: a decision's text formats several dates per event.
        var text: [UInt8] = []
        text.reserveCapacity(24)
        func digits(_ value: Int, _ width: Int) {
            var divisor = 1
            for _ in 1..<width { divisor *= 10 }
            var value = value
            if value >= divisor * 10 {
                text.append(contentsOf: String(value).utf8)
                return
            }
            while divisor > 0 {
                text.append(UInt8(ascii: "0") + UInt8(value / divisor))
                value %= divisor
                divisor /= 10
            }
        }
        if y < 0 { text.append(contentsOf: String(y).utf8) } else { digits(y, 4) }
        text.append(UInt8(ascii: "-"))
        digits(m, 2)
        text.append(UInt8(ascii: "-"))
        digits(d, 2)
        text.append(UInt8(ascii: "T"))
        digits(rest / 3600, 2)
        text.append(UInt8(ascii: ":"))
        digits(rest % 3600 / 60, 2)
        text.append(UInt8(ascii: ":"))
        digits(rest % 60, 2)
        if fractional {
            let millis = Int(((interval - whole) * 1000).rounded(.down))
            if millis > 0 {
                text.append(UInt8(ascii: "."))
                digits(millis, 3)
            }
        }
        text.append(UInt8(ascii: "Z"))
        return String(decoding: text, as: UTF8.self)
    }

    package static func daysInMonth(year: Int, month: Int) -> Int {
        switch month {
        case 2: (year % 4 == 0 && year % 100 != 0) || year % 400 == 0 ? 29 : 28
        case 4, 6, 9, 11: 30
        default: 31
        }
    }

    /// Days since 1970-01-01 (Howard Hinnant's `days_from_civil`).
    package static func daysFromCivil(year: Int, month: Int, day: Int) -> Int {
        let y = month <= 2 ? year - 1 : year
        let era = (y >= 0 ? y : y - 399) / 400
        let yoe = y - era * 400
        let mp = (month + 9) % 12
        let doy = (153 * mp + 2) / 5 + day - 1
        let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy
        return era * 146_097 + doe - 719_468
    }

    package static func civilFromDays(_ days: Int) -> (Int, Int, Int) {
        let z = days + 719_468
        let era = (z >= 0 ? z : z - 146_096) / 146_097
        let doe = z - era * 146_097
        let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365
        let doy = doe - (365 * yoe + yoe / 4 - yoe / 100)
        let mp = (5 * doy + 2) / 153
        let d = doy - (153 * mp + 2) / 5 + 1
        let m = mp < 10 ? mp + 3 : mp - 9
        return (yoe + era * 400 + (m <= 2 ? 1 : 0), m, d)
    }
}
