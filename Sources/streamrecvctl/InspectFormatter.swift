import Bitstream

/// Renders `StreamInspector` records as a table for people or as JSON lines for programs (docs/inspect.md).
struct InspectFormatter {
    let json: Bool
    let summaryOnly: Bool

    func write(_ record: StreamInspector.Record) {
        if json {
            if let line = jsonLine(record) { print(line) }
        } else if let line = tableLine(record) {
            print(line)
        }
    }

    // MARK: JSON

    func jsonLine(_ record: StreamInspector.Record) -> String? {
        var line = JSONLine()
        switch record {
        case .accessUnit(let index, let offset, let size, let unit):
            if summaryOnly { return nil }
            line.add("type", "au")
            line.add("index", index)
            line.add("offset", offset)
            line.add("size", size)
            line.add("nal_types", unit.nalUnitTypes.map(Int.init))
            line.add("keyframe", unit.isKeyframe)
            line.add("random_access", unit.randomAccess?.rawValue)
            line.add("slices", unit.sliceCount)
            line.add("pps", unit.ppsId)
            line.add("end", unit.end.rawValue)
            if let orientation = unit.displayOrientation {
                var object = JSONLine()
                object.add("rotation", orientation?.rotationDegrees ?? 0)
                object.add("hflip", orientation?.horizontalFlip ?? false)
                object.add("vflip", orientation?.verticalFlip ?? false)
                line.add("orientation", object: object)
            }
        case .parameterSet(let offset, let event):
            line.add("type", "parameter_set")
            line.add("kind", event.kind.rawValue)
            line.add("id", event.id)
            line.add("codec", event.codec.rawValue)
            line.add("offset", offset)
            if let format = event.format {
                line.add("width", format.width)
                line.add("height", format.height)
                line.add("coded_width", format.codedWidth)
                line.add("coded_height", format.codedHeight)
                line.add("bit_depth", format.bitDepthLuma)
                line.add("bit_depth_chroma", format.bitDepthChroma)
                line.add("chroma_format", format.chromaFormat.description)
                line.add("profile", format.profile)
                line.add("level", format.level)
                line.add("fps", format.frameRate?.framesPerSecond)
                line.add("reorder", format.reorderDepth)
            }
            if event.kind == .pps { line.add("sps_id", event.referencedId) }
            if event.kind == .sps && event.codec == .h265 { line.add("vps_id", event.referencedId) }
            line.add("changed", event.isChange)
            if let changes = event.changes { line.add("changes", changes.names) }
            if !event.invalidated.isEmpty {
                line.add("invalidated", event.invalidated.map { "\($0.kind.rawValue)\($0.id)" })
            }
        case .problem(let problem):
            line.add("type", "problem")
            line.add("kind", problem.kind.rawValue)
            line.add("offset", problem.streamOffset)
            line.add("detail", problem.error?.description)
        case .summary(let summary):
            line.add("type", "summary")
            line.add("codec", summary.codec?.rawValue)
            line.add("bytes", summary.bytes)
            line.add("access_units", summary.accessUnits)
            line.add("keyframes", summary.keyframes)
            line.add("nal_units", summary.assembler.nalUnits)
            line.add("parameter_set_repeats", summary.assembler.parameterSetRepeats)
            line.add("discarded_bytes", summary.splitter.discardedBytes)
            line.add("oversized_nal_units", summary.splitter.oversizedNALUnits)
            line.add("empty_nal_units", summary.splitter.emptyNALUnits)
            line.add("forbidden_bit_nal_units", summary.assembler.forbiddenBitNALUnits)
            line.add("nal_units_before_codec", summary.assembler.nalUnitsBeforeCodecDetected)
            line.add("rejected_parameter_sets", summary.assembler.rejectedParameterSets)
            line.add("slice_header_errors", summary.assembler.sliceHeaderErrors)
            line.add("oversized_access_units", summary.assembler.oversizedAccessUnits)
        }
        return line.rendered
    }

    // MARK: Table

    func tableLine(_ record: StreamInspector.Record) -> String? {
        switch record {
        case .accessUnit(let index, let offset, let size, let unit):
            if summaryOnly { return nil }
            if index == 0 {
                print(pad("AU", 7) + pad("OFFSET", 12) + pad("SIZE", 9) + pad("KEY", 16) + pad("SLICES", 7) + "NAL TYPES")
            }
            let key = unit.randomAccess?.rawValue ?? "-"
            let types = unit.nalUnitTypes.map(String.init).joined(separator: " ")
            return pad(String(index), 7) + pad(String(offset), 12) + pad(String(size), 9) + pad(key, 16)
                + pad(String(unit.sliceCount), 7) + types
        case .parameterSet(let offset, let event):
            var text = "\(event.kind.rawValue.uppercased()) \(event.id) (\(event.codec.rawValue)) at \(offset)"
            if let format = event.format {
                text += ": \(format.width)x\(format.height)"
                if format.width != format.codedWidth || format.height != format.codedHeight {
                    text += " (coded \(format.codedWidth)x\(format.codedHeight))"
                }
                text += " \(format.chromaFormat) \(format.bitDepthLuma)-bit profile \(format.profile) level \(format.level)"
                text += " fps \(format.frameRate?.description ?? "?") reorder \(format.reorderDepth.map(String.init) ?? "?")"
            } else if let referenced = event.referencedId {
                text += " -> \(event.kind == .pps ? "SPS" : "VPS") \(referenced)"
            }
            if let changes = event.changes {
                text += changes.isEmpty ? " [changed]" : " [changed: \(changes)]"
            }
            return text
        case .problem(let problem):
            return "problem: \(problem)"
        case .summary(let s):
            var text = "\n\(s.codec?.rawValue ?? "unknown codec"): \(s.bytes) bytes, \(s.accessUnits) access units"
            text += " (\(s.keyframes) random-access), \(s.assembler.nalUnits) NAL units,"
            text += " \(s.assembler.parameterSetRepeats) repeated parameter sets"
            let problems = [
                ("discarded bytes", Int(s.splitter.discardedBytes)), ("oversized NAL units", s.splitter.oversizedNALUnits),
                ("forbidden-bit NAL units", s.assembler.forbiddenBitNALUnits),
                ("NAL units before codec", s.assembler.nalUnitsBeforeCodecDetected),
                ("rejected parameter sets", s.assembler.rejectedParameterSets),
                ("slice header errors", s.assembler.sliceHeaderErrors),
                ("oversized access units", s.assembler.oversizedAccessUnits),
            ].filter { $0.1 > 0 }
            if !problems.isEmpty {
                text += "\nproblems: " + problems.map { "\($0.1) \($0.0)" }.joined(separator: ", ")
            }
            return text
        }
    }

    private func pad(_ text: String, _ width: Int) -> String {
        text.count >= width ? text + " " : text + String(repeating: " ", count: width - text.count)
    }
}
