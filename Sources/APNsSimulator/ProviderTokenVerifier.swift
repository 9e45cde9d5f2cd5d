import Crypto
import Foundation

/// A provider token (JWT) that passed the signature check.
struct VerifiedProviderToken: Sendable {
    var keyID: String
    var teamID: String
    var issuedAt: Int
    var key: SimulatorConfiguration.AcceptedKey?
    /// Short fingerprint for records: tells tokens apart without revealing them.
    var fingerprint: String
}

/// Checks ES256 provider tokens against the accepted keys, as APNs does (header `alg`/`kid`, claims `iss`/`iat`).
struct ProviderTokenVerifier: Sendable {
    let keys: [String: SimulatorConfiguration.AcceptedKey]
    let acceptUnknownKeys: Bool

    init(keys: [SimulatorConfiguration.AcceptedKey], acceptUnknownKeys: Bool) {
        self.keys = Dictionary(keys.map { ($0.keyID, $0) }, uniquingKeysWith: { _, last in last })
        self.acceptUnknownKeys = acceptUnknownKeys
    }

    /// The verified token, or `nil` when it is malformed, unsigned by a known key, or for the wrong team
    /// (all `InvalidProviderToken` at APNs).
    func verify(_ jwt: Substring) -> VerifiedProviderToken? {
        let parts = jwt.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3,
            let headerBytes = Base64URL.decode(parts[0]),
            let claimsBytes = Base64URL.decode(parts[1]),
            let signatureBytes = Base64URL.decode(parts[2]),
            let header = try? JSONDecoder().decode(Header.self, from: Data(headerBytes)),
            let claims = try? JSONDecoder().decode(Claims.self, from: Data(claimsBytes)),
            header.alg == "ES256"
        else { return nil }
        let fingerprint = String(
            SHA256.hash(data: Data(jwt.utf8)).prefix(6).map { String(format: "%02x", $0) }.joined())
        guard let key = keys[header.kid] else {
            guard acceptUnknownKeys else { return nil }
            return VerifiedProviderToken(
                keyID: header.kid, teamID: claims.iss, issuedAt: claims.iat, key: nil, fingerprint: fingerprint)
        }
        guard key.teamID == claims.iss,
            let signature = try? P256.Signing.ECDSASignature(rawRepresentation: signatureBytes),
            key.publicKey.isValidSignature(signature, for: Data(jwt.utf8[..<parts[1].endIndex]))
        else { return nil }
        return VerifiedProviderToken(
            keyID: header.kid, teamID: claims.iss, issuedAt: claims.iat, key: key, fingerprint: fingerprint)
    }

    private struct Header: Decodable {
        var alg: String
        var kid: String
    }

    private struct Claims: Decodable {
        var iss: String
        var iat: Int
    }
}

enum Base64URL {
    static func decode(_ text: Substring) -> [UInt8]? {
        var base64 = text.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        while base64.utf8.count % 4 != 0 { base64 += "=" }
        guard let data = Data(base64Encoded: base64) else { return nil }
        return Array(data)
    }
}
