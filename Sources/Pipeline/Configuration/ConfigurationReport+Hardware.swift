import Bitstream
import Decoding

extension ConfigurationReport {
    /// What each stream's `hwaccel` finds on this machine, as the daemon would find it at start: a named
    /// accelerator whose device does not open is an error (the daemon would not start); `auto` says which path it
    /// takes and why the others lost. Both codecs are asked unless the stream names one.
    public mutating func checkHardware(_ configuration: DaemonConfiguration, probe: HardwareDeviceProbing = FFmpegHardwareProbe()) {
        for stream in configuration.streams where stream.decoder.hardware != .none {
            for codec in stream.codec.map({ [$0] }) ?? [.h264, .h265] {
                do {
                    let selection = try HardwareSelection.select(stream.decoder.hardware, codec: codec, probe: probe)
                    lines.append("stream \(stream.name): \(codec.rawValue): \(selection.summary)")
                } catch {
                    errors.append(Problem(line: stream.lines.line(of: "hwaccel"), message: "stream \(stream.name): \(codec.rawValue): \(error)"))
                }
            }
        }
    }
}
