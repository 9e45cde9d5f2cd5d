import Testing

@testable import RabbitMQ

@Suite struct PublishConfirmTrackerTests {
    typealias Tracker = PublishConfirmTracker<String>

    @Test func sequenceNumbersStartAtOne() {
        var tracker = Tracker()
        #expect(tracker.register("a") == 1)
        #expect(tracker.register("b") == 2)
        #expect(tracker.outstandingCount == 2)
    }

    @Test func singleAckSettlesOnlyThatTag() {
        var tracker = Tracker()
        for token in ["a", "b", "c"] { _ = tracker.register(token) }
        let settled = tracker.settle(tag: 2, multiple: false, acked: true)
        #expect(settled.map(\.token) == ["b"])
        #expect(settled.map(\.outcome) == [.confirmed])
        #expect(tracker.outstandingCount == 2)
    }

    @Test func multipleAckSettlesEverythingUpToTheTag() {
        var tracker = Tracker()
        for token in ["a", "b", "c", "d"] { _ = tracker.register(token) }
        _ = tracker.settle(tag: 2, multiple: false, acked: true)
        let settled = tracker.settle(tag: 3, multiple: true, acked: true)
        #expect(settled.map(\.token) == ["a", "c"])
        #expect(tracker.outstandingCount == 1)
        // A repeated or lower multiple ack settles nothing more.
        #expect(tracker.settle(tag: 3, multiple: true, acked: true).isEmpty)
        #expect(tracker.settle(tag: 4, multiple: true, acked: true).map(\.token) == ["d"])
    }

    @Test func nackReportsNacked() {
        var tracker = Tracker()
        for token in ["a", "b"] { _ = tracker.register(token) }
        let settled = tracker.settle(tag: 2, multiple: true, acked: false)
        #expect(settled.map(\.outcome) == [.nacked, .nacked])
    }

    @Test func returnMarksTheOldestMatchingMandatoryPublish() {
        var tracker = Tracker()
        let key = Tracker.ReturnKey(exchange: "x", routingKey: "nowhere", body: [1, 2])
        _ = tracker.register(
            "routed", returnKey: Tracker.ReturnKey(exchange: "x", routingKey: "somewhere", body: [1, 2]))
        _ = tracker.register("first-unroutable", returnKey: key)
        _ = tracker.register("second-unroutable", returnKey: key)
        let matched = tracker.markReturned(key, replyCode: 312, replyText: "NO_ROUTE")
        #expect(matched)
        let settled = tracker.settle(tag: 3, multiple: true, acked: true)
        #expect(settled.map(\.token) == ["routed", "first-unroutable", "second-unroutable"])
        #expect(settled.map(\.outcome) == [.confirmed, .returned(replyCode: 312, replyText: "NO_ROUTE"), .confirmed])
    }

    @Test func returnWithoutMatchIsReported() {
        var tracker = Tracker()
        _ = tracker.register("not-mandatory")
        let matched = tracker.markReturned(
            .init(exchange: "", routingKey: "q", body: []), replyCode: 312, replyText: "")
        #expect(!matched)
    }

    @Test func removeAllReturnsOutstandingInOrder() {
        var tracker = Tracker()
        for token in ["a", "b", "c"] { _ = tracker.register(token) }
        _ = tracker.settle(tag: 2, multiple: false, acked: true)
        #expect(tracker.removeAll() == ["a", "c"])
        #expect(tracker.outstandingCount == 0)
        #expect(tracker.register("d") == 4)
    }
}
