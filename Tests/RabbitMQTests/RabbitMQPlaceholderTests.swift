import Testing
@testable import RabbitMQ

@Test func RabbitMQModuleLinks() {}
