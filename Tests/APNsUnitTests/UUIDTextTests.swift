import Foundation
import Testing

@testable import APNs

@Suite("apns-id text matches Foundation's")
struct UUIDTextTests {
    @Test func formatsAndParsesLikeFoundation() {
        for _ in 0..<1_000 {
            let uuid = UUID()
            let text = UUIDText.lowercased(uuid)
            #expect(text == uuid.uuidString.lowercased())
            #expect(UUIDText.parse(text) == uuid)
            #expect(UUIDText.parse(uuid.uuidString) == uuid)
        }
        let edge = UUID(uuid: (0, 0xFF, 0x0F, 0xF0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xAB, 0xCD))
        #expect(UUIDText.lowercased(edge) == "00ff0ff0-0000-0000-0000-00000000abcd")
    }

    @Test func rejectsWhatFoundationRejects() {
        let text = UUIDText.lowercased(UUID())
        var cases = [
            "", "not-a-uuid", String(text.dropLast()), text + "0", text.replacingOccurrences(of: "-", with: ""),
            "{" + text.dropFirst(2) + "}", "g" + text.dropFirst(),
        ]
        // A dash moved by one place.
        var bytes = Array(text.utf8)
        bytes.swapAt(8, 9)
        cases.append(String(decoding: bytes, as: UTF8.self))
        for bad in cases {
            #expect(UUIDText.parse(bad) == nil, "\(bad)")
            #expect(UUID(uuidString: bad) == nil, "\(bad)")
        }
    }
}
