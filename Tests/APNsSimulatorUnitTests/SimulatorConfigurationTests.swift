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
