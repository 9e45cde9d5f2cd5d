import Testing
@testable import LiveDeliveryCore

@Test func LiveDeliveryCoreModuleLinks() {}
