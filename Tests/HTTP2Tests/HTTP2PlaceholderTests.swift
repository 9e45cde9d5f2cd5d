import Testing
@testable import HTTP2

@Test func HTTP2ModuleLinks() {}
