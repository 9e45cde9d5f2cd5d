import Crypto
import Foundation
import SwiftASN1
import X509

/// A self-signed P-256 certificate for the given host names and IPv4 addresses, usable as its own CA file.
struct SelfSignedCertificate {
    let certificatePEM: String
    let privateKeyPEM: String

    init(hostNames: [String], commonName: String = "apns-sim", now: Date = Date()) throws(SimulatorError) {
        let names: [GeneralName] = hostNames.map { name in
            let octets = name.split(separator: ".", omittingEmptySubsequences: false).compactMap { UInt8($0) }
            return octets.count == 4 ? .ipAddress(ASN1OctetString(contentBytes: ArraySlice(octets))) : .dnsName(name)
        }
        do {
            let key = P256.Signing.PrivateKey()
            let name = try DistinguishedName { CommonName(commonName) }
            let certificate = try Certificate(
                version: .v3,
                serialNumber: Certificate.SerialNumber(),
                publicKey: Certificate.PublicKey(key.publicKey),
                notValidBefore: now.addingTimeInterval(-3600),
                notValidAfter: now.addingTimeInterval(365 * 24 * 3600),
                issuer: name,
                subject: name,
                signatureAlgorithm: .ecdsaWithSHA256,
                extensions: try Certificate.Extensions {
                    Critical(BasicConstraints.isCertificateAuthority(maxPathLength: 0))
                    Critical(KeyUsage(digitalSignature: true, keyCertSign: true))
                    try ExtendedKeyUsage([.serverAuth])
                    SubjectAlternativeNames(names)
                },
                issuerPrivateKey: Certificate.PrivateKey(key)
            )
            certificatePEM = try certificate.serializeAsPEM().pemString
            privateKeyPEM = key.pemRepresentation
        } catch {
            throw SimulatorError(.certificate, "cannot create a self-signed certificate: \(error)")
        }
    }
}
