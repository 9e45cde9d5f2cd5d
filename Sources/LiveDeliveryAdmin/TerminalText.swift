/// What a publisher wrote, made safe to print on an operator's terminal and to open in a spreadsheet.
///
/// Routing keys, event ids, messages and bodies come from whoever can publish. A control character
/// in them (ESC starts a terminal's escape sequences; CR rewrites a line) or a bidirectional override
/// (which reorders what is shown) could disguise what the CLI prints, so each is shown as U+FFFD. A CSV
/// cell that starts like a formula is defused for spreadsheet programs.
package enum TerminalText {
    /// `text` with every control character (C0 but, with `keepingLines`, LF and tab; DEL; C1) and every
    /// bidirectional override or isolate replaced by U+FFFD.
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
        case 0x202A...0x202E, 0x2066...0x2069: true
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
