/// What a publisher wrote, made safe to print on an operator's terminal and to open in a spreadsheet.
///
/// Routing keys, event ids, order ids, messages and bodies come from whoever can publish. A control
/// character in them (ESC starts a terminal's escape sequences; CR rewrites a line; C1 holds CSI and
/// OSC of their own), a bidirectional control (which reorders what is shown) or a line or paragraph
/// separator could disguise what the CLI prints, so each is shown as U+FFFD in text, tables and CSV,
/// and written as its `\uXXXX` escape in JSON. A CSV cell that starts like a formula is defused for
/// spreadsheet programs.
package enum TerminalText {
    /// `text` with every control character (C0 but, with `keepingLines`, LF and tab; DEL; C1), every
    /// bidirectional control (U+061C, U+200E, U+200F, the overrides U+202A–U+202E and the isolates
    /// U+2066–U+2069) and the line and paragraph separators U+2028 and U+2029 replaced by U+FFFD.
    package static func printable(_ text: String, keepingLines: Bool = false) -> String {
        guard text.unicodeScalars.contains(where: { isHidden($0, keepingLines: keepingLines) }) else { return text }
        var result = String.UnicodeScalarView()
        for scalar in text.unicodeScalars {
            result.append(isHidden(scalar, keepingLines: keepingLines) ? "\u{FFFD}" : scalar)
        }
        return String(result)
    }

    private static func isHidden(_ scalar: Unicode.Scalar, keepingLines: Bool) -> Bool {
        switch scalar.value {
        case 0x0A, 0x09: !keepingLines
        case 0x00...0x1F, 0x7F...0x9F: true
        case 0x061C, 0x200E, 0x200F, 0x202A...0x202E, 0x2066...0x2069: true
        case 0x2028, 0x2029: true
        default: false
        }
    }

    /// JSON text with every character a terminal would act on (DEL, C1, bidirectional controls, line
    /// and paragraph separators) written as its `\uXXXX` escape: the same string to a
    /// JSON parser, plain ASCII on a terminal. (The JSON encoder escapes C0 itself.) Outside strings,
    /// JSON holds none of these characters.
    package static func escapedJSON(_ json: String) -> String {
        guard json.unicodeScalars.contains(where: isEscapedInJSON) else { return json }
        var result = ""
        for scalar in json.unicodeScalars {
            if isEscapedInJSON(scalar) {
                let hex = String(scalar.value, radix: 16)
                result += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
            } else {
                result.unicodeScalars.append(scalar)
            }
        }
        return result
    }

    /// Whether ``escapedJSON(_:)`` writes `scalar` as its escape.
    package static func isEscapedInJSON(_ scalar: Unicode.Scalar) -> Bool {
        switch scalar.value {
        case 0x7F...0x9F, 0x061C, 0x200E, 0x200F, 0x202A...0x202E, 0x2066...0x2069, 0x2028, 0x2029: true
        default: false
        }
    }

    /// A text cell for CSV: one that a spreadsheet would take for a formula (it starts with `=`, `+`,
    /// `-`, `@`, a tab or CR) gets a leading `'`, which spreadsheets show as text.
    package static func defusedCell(_ text: String) -> String {
        guard let first = text.unicodeScalars.first, "=+-@\t\r".unicodeScalars.contains(first) else { return text }
        return "'" + text
    }
}
