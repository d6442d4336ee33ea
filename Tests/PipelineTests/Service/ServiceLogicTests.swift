import Glibc
import NIOCore
@testable import Pipeline
import Bitstream
import Testing

@Suite struct ReloadPlanTests {
    func stream(_ name: String, port: Int, slots: Int = 8) -> StreamConfiguration {
        var stream = StreamConfiguration(name: name, source: .tcp(ListenAddress(transport: .tcp, host: "127.0.0.1", port: port)))
        stream.slots = slots
        return stream
    }

    @Test func streamsAreAddedRemovedChangedOrLeftAlone() {
        let old = [stream("a", port: 1), stream("b", port: 2), stream("c", port: 3)]
        let new = [stream("c", port: 3, slots: 16), stream("a", port: 1), stream("d", port: 4)]
        let plan = ReloadPlan(from: old, to: new)
        #expect(plan.added == ["d"] && plan.removed == ["b"] && plan.changed == ["c"] && plan.unchanged == ["a"])
        #expect(plan.stop == ["b", "c"] && plan.start == ["c", "d"])
        #expect(plan.summary == "added d; removed b; changed c; unchanged a")
        #expect(ReloadPlan(from: old, to: old).stop.isEmpty, "an identical file touches nothing")
    }
}

@Suite struct FormattingTests {
    /// The daemon formats numbers without Foundation (it does not link it): as printf's %.Nf.
    @Test func decimalsAsPrintfWritesThem() {
        #expect(String(2.0, decimals: 1) == "2.0" && String(1.256, decimals: 2) == "1.26" && String(-0.04, decimals: 1) == "-0.0")
        #expect(String(12345678.9, decimals: 0) == "12345679" && String(Double.infinity, decimals: 1) == "inf")
        #expect(ConfigurationReport.size(3 << 29) == "1.5 GiB" && ConfigurationReport.size(5 << 20) == "5.0 MiB")
    }
}
