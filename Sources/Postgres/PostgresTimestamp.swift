import Foundation
import LiveDeliveryTime

/// Text forms of `timestamptz`, with microsecond precision, without `DateFormatter`.
///
/// Output is UTC (`2024-05-01 12:30:00.123456+00`). Input is PostgreSQL's ISO output style (the connection sets
/// `DateStyle=ISO` and `TimeZone=UTC`), with any numeric offset, an optional fraction, years beyond 9999 and `BC`.
enum PostgresTimestamp {
    private static let unixEpochMicrosecondsSinceReference: Int64 = 978_307_200 * 1_000_000
    private static let microsecondsPerDay: Int64 = 86_400 * 1_000_000

    static func microsecondsSince1970(_ date: Date) -> Int64 {
        Int64((date.timeIntervalSinceReferenceDate * 1_000_000).rounded()) + unixEpochMicrosecondsSinceReference
    }

    /// PostgreSQL's own epoch, for the binary form.
    static func microsecondsSince2000(_ date: Date) -> Int64 {
        microsecondsSince1970(date) - 946_684_800 * 1_000_000
    }

    static func date(microsecondsSince1970 micros: Int64) -> Date {
        let sinceReference = micros - unixEpochMicrosecondsSinceReference
        let seconds = sinceReference.quotientRoundingDown(by: 1_000_000)
        let fraction = sinceReference - seconds * 1_000_000
        return Date(timeIntervalSinceReferenceDate: Double(seconds) + Double(fraction) / 1_000_000)
    }

    static func format(_ date: Date) -> String {
        let micros = microsecondsSince1970(date)
        let days = micros.quotientRoundingDown(by: microsecondsPerDay)
        var rest = micros - days * microsecondsPerDay
        let (year, month, day) = civil(fromDays: days)
        let hour = rest / 3_600_000_000
        rest -= hour * 3_600_000_000
        let minute = rest / 60_000_000
        rest -= minute * 60_000_000
        let second = rest / 1_000_000
        let fraction = rest - second * 1_000_000
        var text = ""
        text.reserveCapacity(32)
        let isBC = year <= 0
        append(isBC ? 1 - year : year, width: 4, to: &text)
        text.append("-")
        append(month, width: 2, to: &text)
        text.append("-")
        append(day, width: 2, to: &text)
        text.append(" ")
        append(hour, width: 2, to: &text)
        text.append(":")
        append(minute, width: 2, to: &text)
        text.append(":")
        append(second, width: 2, to: &text)
        text.append(".")
        append(fraction, width: 6, to: &text)
        text.append("+00")
        if isBC { text.append(" BC") }
        return text
    }

    static func parse(_ text: String) -> Date? {
        var bytes = Array(text.utf8)
        var isBC = false
        if bytes.count > 3, bytes.suffix(3) == Array(" BC".utf8) {
            isBC = true
            bytes.removeLast(3)
        }
        var index = 0
        func number(maxDigits: Int = 18) -> Int64? {
            var value: Int64 = 0
            let start = index
            while index < bytes.count, index - start < maxDigits, let digit = digit(bytes[index]) {
                value = value * 10 + digit
                index += 1
            }
            return index > start ? value : nil
        }
        func expect(_ character: Character) -> Bool {
            guard index < bytes.count, bytes[index] == character.asciiValue else { return false }
            index += 1
            return true
        }
        // PostgreSQL's years end at 294276 (AD) and 4714 BC; seven digits leave no room for an overflow.
        guard var year = number(maxDigits: 7), expect("-"), let month = number(maxDigits: 2), expect("-"),
            let day = number(maxDigits: 2), expect(" ") || expect("T"), let hour = number(maxDigits: 2), expect(":"),
            let minute = number(maxDigits: 2), expect(":"), let second = number(maxDigits: 2),
            (1...12).contains(month), (1...31).contains(day), hour < 24, minute < 60, second < 61
        else { return nil }
        var micros: Int64 = 0
        if expect(".") {
            var scale: Int64 = 100_000
            let start = index
            while index < bytes.count, let digit = digit(bytes[index]) {
                micros += digit * scale
                scale /= 10
                index += 1
            }
            guard index > start else { return nil }
        }
        var offsetSeconds: Int64 = 0
        if index < bytes.count {
            let sign: Int64
            if expect("+") {
                sign = 1
            } else if expect("-") {
                sign = -1
            } else if expect("Z") {
                sign = 0
            } else {
                return nil
            }
            if sign != 0 {
                guard let hours = number(maxDigits: 2) else { return nil }
                var seconds = hours * 3600
                if expect(":") {
                    guard let minutes = number(maxDigits: 2) else { return nil }
                    seconds += minutes * 60
                    if expect(":") {
                        guard let extra = number(maxDigits: 2) else { return nil }
                        seconds += extra
                    }
                }
                offsetSeconds = sign * seconds
            }
            guard index == bytes.count else { return nil }
        }
        if isBC { year = 1 - year }
        let days = Self.days(fromCivil: year, month, day)
        let seconds = days * 86_400 + hour * 3600 + minute * 60 + second - offsetSeconds
        // Past what microseconds in an Int64 hold (about 292,000 years from 1970): not a timestamp we read.
        let (whole, overflow) = seconds.multipliedReportingOverflow(by: 1_000_000)
        guard !overflow, whole <= Int64.max - micros else { return nil }
        return date(microsecondsSince1970: whole + micros)
    }

    private static func digit(_ byte: UInt8) -> Int64? {
        byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9") ? Int64(byte - UInt8(ascii: "0")) : nil
    }

    private static func append(_ value: Int64, width: Int, to text: inout String) {
        let digits = String(value)
        if digits.count < width { text.append(String(repeating: "0", count: width - digits.count)) }
        text.append(digits)
    }

    /// Days since 1970-01-01 → proleptic Gregorian date (``RFC3339/civilFromDays(_:)``).
    static func civil(fromDays days: Int64) -> (year: Int64, month: Int64, day: Int64) {
        let (year, month, day) = RFC3339.civilFromDays(Int(days))
        return (Int64(year), Int64(month), Int64(day))
    }

    static func days(fromCivil year: Int64, _ month: Int64, _ day: Int64) -> Int64 {
        Int64(RFC3339.daysFromCivil(year: Int(year), month: Int(month), day: Int(day)))
    }
}

extension Int64 {
    /// Floor division (rounds toward negative infinity).
    func quotientRoundingDown(by divisor: Int64) -> Int64 {
        let (quotient, remainder) = quotientAndRemainder(dividingBy: divisor)
        return remainder != 0 && (remainder < 0) != (divisor < 0) ? quotient - 1 : quotient
    }
}
