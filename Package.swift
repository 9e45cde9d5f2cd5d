// swift-tools-version: 6.2
import PackageDescription

// Shared Swift settings, applied to every non-system target in the loop at the bottom.
let swiftSettings: [SwiftSetting] = [
    .swiftLanguageMode(.v6),
    .enableUpcomingFeature("ExistentialAny"),
    .enableUpcomingFeature("MemberImportVisibility"),
    .enableUpcomingFeature("InternalImportsByDefault"),
    .enableUpcomingFeature("NonisolatedNonsendingByDefault"),
]

let package = Package(
    name: "LiveDelivery",
    platforms: [.macOS(.v15)],
    products: [
        .executable(name: "livedelivery", targets: ["livedelivery"]),
        .executable(name: "livedelivery-bench", targets: ["livedelivery-bench"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-log.git", from: "1.16.0"),
        .package(url: "https://github.com/apple/swift-argument-parser.git", from: "1.8.0"),
    ],
    targets: [
        // MARK: C libraries (system) and the one C shim target
        .systemLibrary(
            name: "CRabbitMQ",
            pkgConfig: "librabbitmq",
            providers: [.apt(["librabbitmq-dev"]), .brew(["rabbitmq-c"])]
        ),
        .systemLibrary(
            name: "CLibPQ",
            pkgConfig: "libpq",
            providers: [.apt(["libpq-dev"]), .brew(["libpq"])]
        ),
        .systemLibrary(
            name: "CCurl",
            pkgConfig: "libcurl",
            providers: [.apt(["libcurl4-openssl-dev"])]
        ),
        .target(name: "CShims", dependencies: ["CRabbitMQ", "CLibPQ", "CCurl"]),

        // MARK: Wrapper modules: the only Swift modules that import C
        .target(
            name: "RabbitMQ",
            dependencies: ["CRabbitMQ", "CShims", .product(name: "Logging", package: "swift-log")]
        ),
        .target(
            name: "Postgres",
            dependencies: ["CLibPQ", "CShims", .product(name: "Logging", package: "swift-log")]
        ),
        .target(
            name: "HTTP2",
            dependencies: ["CCurl", "CShims", .product(name: "Logging", package: "swift-log")]
        ),

        // MARK: Product modules
        .target(name: "LiveDeliveryCore"),
        .target(
            name: "LiveDelivery",
            dependencies: [
                "LiveDeliveryCore", "RabbitMQ", "Postgres", "HTTP2",
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        .executableTarget(
            name: "livedelivery",
            dependencies: [
                "LiveDelivery", "LiveDeliveryCore",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        .executableTarget(
            name: "livedelivery-bench",
            dependencies: [
                "RabbitMQ", "Postgres", "HTTP2",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),

        // MARK: Tests
        .target(name: "TestSupport"),
        .testTarget(
            name: "RabbitMQTests",
            dependencies: ["RabbitMQ", "TestSupport", .product(name: "Logging", package: "swift-log")]
        ),
        .testTarget(name: "PostgresTests", dependencies: ["Postgres", "TestSupport"]),
        .testTarget(name: "HTTP2Tests", dependencies: ["HTTP2", "TestSupport"]),
        .testTarget(name: "LiveDeliveryCoreTests", dependencies: ["LiveDeliveryCore"]),
    ]
)

for target in package.targets where target.type != .system {
    target.swiftSettings = (target.swiftSettings ?? []) + swiftSettings
}
