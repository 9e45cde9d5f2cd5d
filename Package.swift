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
        .executable(name: "livedelivery", targets: ["LiveDeliveryCLI"]),
        .executable(name: "livedelivery-bench", targets: ["livedelivery-bench"]),
        .executable(name: "apns-sim", targets: ["apns-sim"]),
        // The failover topologies (cluster, replica, managed) for a person and scripts/test: start, stop, reset, env.
        .executable(name: "livedelivery-servers", targets: ["livedelivery-servers"]),
        // What an iOS app imports: the default contract's ActivityAttributes and the events the app reports.
        .library(name: "LiveDeliveryActivity", targets: ["LiveDeliveryActivity"]),
    ],
    traits: [
        // The worker's spans exported over OTLP/HTTP (swift-otel, with swift-protobuf and async-http-client). Off by
        // default, so that the worker and the CLI build without them; `swift build --traits OTLP` turns it on
        // (scripts/test and the Dockerfile do). A build without it refuses an OTEL_* export at start.
        .trait(name: "OTLP", description: "Export the worker's spans over OTLP/HTTP (swift-otel)")
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-log.git", from: "1.16.0"),
        .package(url: "https://github.com/apple/swift-argument-parser.git", from: "1.8.0"),
        .package(url: "https://github.com/x-sheep/swift-property-based.git", from: "2.0.1"),
        // APNs client (JWT signing) and apns-sim (TLS HTTP/2 server, self-signed certificate).
        .package(url: "https://github.com/apple/swift-crypto.git", "3.12.0"..<"5.0.0"),
        .package(url: "https://github.com/apple/swift-certificates.git", from: "1.21.0"),
        .package(url: "https://github.com/apple/swift-asn1.git", from: "1.3.0"),
        .package(url: "https://github.com/apple/swift-nio.git", from: "2.101.0"),
        .package(url: "https://github.com/apple/swift-nio-ssl.git", from: "2.37.0"),
        .package(url: "https://github.com/apple/swift-nio-http2.git", from: "1.46.0"),
        // The worker runtime: services, configuration, metrics.
        .package(url: "https://github.com/swift-server/swift-service-lifecycle.git", from: "2.13.0"),
        .package(url: "https://github.com/apple/swift-configuration.git", from: "1.4.0"),
        .package(url: "https://github.com/apple/swift-metrics.git", from: "2.13.0"),
        .package(url: "https://github.com/swift-server/swift-prometheus.git", from: "2.4.1"),
        // Tests only: the end-to-end tests parse `--format csv` with a real CSV parser.
        .package(url: "https://github.com/swiftcsv/SwiftCSV.git", from: "0.10.0"),
        // Spans for each event and APNs request, under whatever tracer the process bootstraps.
        .package(url: "https://github.com/apple/swift-distributed-tracing.git", from: "1.2.0"),
        // Their export over OTLP/HTTP (`livedelivery run`, when an OTLP endpoint is configured); not gRPC.
        .package(url: "https://github.com/swift-otel/swift-otel.git", from: "1.6.0", traits: ["OTLPHTTP"]),
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
        // prctl for `livedelivery run` (non-dumpable): variadic, so Swift needs a C function around it.
        .target(name: "CProcessControl"),

        // MARK: Wrapper modules: the only Swift modules that import C
        .target(
            name: "RabbitMQ",
            dependencies: ["CRabbitMQ", "CShims", .product(name: "Logging", package: "swift-log")]
        ),
        .target(
            name: "Postgres",
            dependencies: ["CLibPQ", "CShims", "LiveDeliveryTime", .product(name: "Logging", package: "swift-log")]
        ),
        .target(
            name: "HTTP2",
            dependencies: ["CCurl", "CShims", .product(name: "Logging", package: "swift-log")]
        ),

        // MARK: APNs client and the APNs simulator
        .target(
            name: "APNs",
            dependencies: [
                "APNsModel", "HTTP2",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        .target(
            name: "APNsSimulator",
            dependencies: [
                "LiveDeliveryJSON",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "NIOHTTP2", package: "swift-nio-http2"),
                .product(name: "NIOHPACK", package: "swift-nio-http2"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "X509", package: "swift-certificates"),
                .product(name: "SwiftASN1", package: "swift-asn1"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        // apns-sim's device agent: the app on the simulated phones reports what a push-to-start gave it.
        .target(
            name: "DeviceAgent",
            dependencies: [
                "APNsSimulator", "LiveDeliveryActivity", "RabbitMQ",
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        .executableTarget(
            name: "apns-sim",
            dependencies: [
                "APNsSimulator", "DeviceAgent", "LiveDeliveryCore", "LiveDeliveryJSON", "RabbitMQ",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
            ],
            exclude: ["README.md"]
        ),

        // MARK: Product modules
        // The one JSON value, parser (a token tape), writer and string escaper: core, worker, apns-sim, logs.
        .target(name: "LiveDeliveryJSON", exclude: ["README.md"]),
        // An APNs request without its transport: built by the core's planner, sent by the APNs client.
        .target(name: "APNsModel"),
        // RFC 3339 timestamps as the worker reads them, Foundation only: the core and the app's side share it.
        .target(name: "LiveDeliveryTime"),
        .target(name: "LiveDeliveryCore", dependencies: ["APNsModel", "LiveDeliveryJSON", "LiveDeliveryTime"]),
        // The app's side of the contract, Foundation only (ActivityKit where it exists): nothing an app would not want.
        .target(name: "LiveDeliveryActivity", dependencies: ["LiveDeliveryTime"]),
        .target(
            name: "LiveDelivery",
            dependencies: [
                "LiveDeliveryCore", "LiveDeliveryJSON", "RabbitMQ", "Postgres", "APNs", "CProcessControl",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "Tracing", package: "swift-distributed-tracing"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "UnixSignals", package: "swift-service-lifecycle"),
                .product(name: "Configuration", package: "swift-configuration"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
            ],
            exclude: ["README.md"]
        ),
        // The admin side: reports, dead letters, failed pushes, status. The worker's runtime does not need it.
        .target(
            name: "LiveDeliveryAdmin",
            dependencies: [
                "LiveDelivery", "LiveDeliveryCore", "LiveDeliveryJSON", "LiveDeliveryTime", "Postgres", "RabbitMQ",
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        // The `livedelivery` executable (the product's name). The target has a name of its own so that no two
        // folders or modules differ only in case from `LiveDelivery`: a Mac's default file system holds one of them.
        .executableTarget(
            name: "LiveDeliveryCLI",
            dependencies: [
                "LiveDelivery", "LiveDeliveryAdmin", "LiveDeliveryCore", "LiveDeliveryJSON", "LiveDeliveryTime",
                "RabbitMQ",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "Configuration", package: "swift-configuration"),
                .product(name: "OTel", package: "swift-otel", condition: .when(traits: ["OTLP"])),
                .product(name: "Tracing", package: "swift-distributed-tracing"),
            ]
        ),
        .executableTarget(
            name: "livedelivery-bench",
            dependencies: [
                "RabbitMQ", "Postgres", "HTTP2", "LiveDeliveryCore", "LiveDeliveryJSON", "LiveDeliveryTime",
                "LiveDelivery", "APNs", "APNsSimulator", "ChildProcesses", "LiveDeliveryAdmin", "ServerFixtures",
                "TestSupport", "WorkerHarness",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
            ],
            exclude: ["README.md"]
        ),

        // MARK: Tests
        // What the test targets share: the servers' addresses, fresh databases, event bodies, traits, and the
        // main and fault pairs' restarts.
        .target(
            name: "TestSupport",
            dependencies: [
                "ChildProcesses", "LiveDelivery", "LiveDeliveryCore", "Postgres", "ServerFixtures",
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        // Child processes with a clean signal mask, for the end-to-end tests and the benchmarks.
        .target(name: "ChildProcesses"),
        // The failover topologies (a RabbitMQ cluster, a primary/standby pair, a pg_auto_failover pair): started,
        // stopped, reset and described, and their faults played, through the servers' own tools. Foundation and
        // ChildProcesses only (the command adds ArgumentParser), so that scripts/test builds `livedelivery-servers`
        // in seconds and boots the topologies while the rest builds.
        .target(name: "ServerFixtures", dependencies: ["ChildProcesses"]),
        .executableTarget(
            name: "livedelivery-servers",
            dependencies: ["ServerFixtures", .product(name: "ArgumentParser", package: "swift-argument-parser")]
        ),
        // One private deployment of the worker (database, simulator, key, processes): the end-to-end
        // tests and the worker benchmark share it.
        .target(
            name: "WorkerHarness",
            dependencies: [
                "APNsSimulator", "ChildProcesses", "Postgres", "RabbitMQ", "TestSupport",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        .testTarget(
            name: "RabbitMQServerTests",
            dependencies: ["RabbitMQ", "TestSupport", .product(name: "Logging", package: "swift-log")]
        ),
        .testTarget(
            name: "PostgresServerTests",
            dependencies: ["Postgres", "TestSupport", .product(name: "Logging", package: "swift-log")]
        ),
        .testTarget(
            name: "HTTP2ServerTests",
            dependencies: ["HTTP2", "TestSupport", .product(name: "Logging", package: "swift-log")]
        ),
        // Test targets say what they need: `…UnitTests` no server (`scripts/test --fast` runs them, in seconds),
        // `…ServerTests` the local RabbitMQ and PostgreSQL (and the cluster, the standby, nghttpd) of scripts/services.
        .testTarget(
            name: "UnitTests",
            dependencies: [
                "APNs", "LiveDelivery", "LiveDeliveryAdmin", "LiveDeliveryCore", "LiveDeliveryJSON", "Postgres",
                "RabbitMQ", "TestSupport",
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        .testTarget(
            name: "LiveDeliveryCoreUnitTests",
            dependencies: [
                "LiveDeliveryActivity", "LiveDeliveryCore", "LiveDeliveryJSON", "LiveDeliveryTime",
                .product(name: "PropertyBased", package: "swift-property-based"),
            ]
        ),
        .testTarget(
            name: "APNsUnitTests",
            dependencies: [
                "APNs", "APNsSimulator", "HTTP2", "TestSupport",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        .testTarget(
            name: "WorkerServerTests",
            dependencies: [
                "LiveDelivery", "LiveDeliveryAdmin", "LiveDeliveryCore", "LiveDeliveryTime", "Postgres", "RabbitMQ",
                "APNs", "APNsSimulator", "TestSupport",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "Tracing", package: "swift-distributed-tracing"),
                .product(name: "InMemoryTracing", package: "swift-distributed-tracing"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "Configuration", package: "swift-configuration"),
            ]
        ),
        .testTarget(
            name: "ReportingServerTests",
            dependencies: [
                "LiveDelivery", "LiveDeliveryAdmin", "LiveDeliveryCore", "LiveDeliveryTime", "Postgres", "RabbitMQ",
                "APNs", "TestSupport",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ]
        ),
        .testTarget(
            name: "APNsSimulatorUnitTests",
            dependencies: [
                "APNsSimulator", "LiveDeliveryJSON", "TestSupport",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "NIOHTTP2", package: "swift-nio-http2"),
                .product(name: "NIOHPACK", package: "swift-nio-http2"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        .testTarget(
            name: "EndToEndServerTests",
            dependencies: [
                "APNsSimulator", "ChildProcesses", "DeviceAgent", "LiveDeliveryCore", "LiveDeliveryJSON",
                "LiveDeliveryTime", "Postgres", "RabbitMQ", "ServerFixtures", "TestSupport", "WorkerHarness",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "SwiftCSV", package: "SwiftCSV"),
            ]
        ),
    ]
)

for target in package.targets where target.type != .system {
    target.swiftSettings = (target.swiftSettings ?? []) + swiftSettings
}
