import Prometheus

extension PrometheusCollectorRegistry {
    /// Every sample line of the exposition, by series (`name{labels}`): what the metrics endpoint would show.
    func samples() -> [String: Double] {
        var samples: [String: Double] = [:]
        for line in emitToString().split(separator: "\n") where !line.hasPrefix("#") {
            guard let space = line.lastIndex(of: " "), let value = Double(line[line.index(after: space)...]) else { continue }
            samples[String(line[..<space])] = value
        }
        return samples
    }

    /// One series' value, e.g. `streamrecvd_access_units_total{stream="stage"}`; nil while it has none.
    func sample(_ series: String) -> Double? { samples()[series] }
}
