/// The opening of the VUI, identical in H.264 (E.1.1) and H.265 (E.2.1): sample aspect ratio, overscan,
/// video signal type with colour description, chroma sample location.
struct VideoSignal {
    var sampleAspectRatio: (Int, Int)?
    var colour: ColourDescription?

    init(_ r: inout BitReader) throws(BitstreamError) {
        if try r.flag("aspect_ratio_info_present_flag") {
            let idc = Int(try r.bits(8, "aspect_ratio_idc"))
            if idc == 255 {
                let width = Int(try r.bits(16, "sar_width"))
                let height = Int(try r.bits(16, "sar_height"))
                if width > 0 && height > 0 { sampleAspectRatio = (width, height) }
            } else {
                sampleAspectRatio = Self.aspectRatios[idc]
            }
        }
        if try r.flag("overscan_info_present_flag") { _ = try r.flag("overscan_appropriate_flag") }
        if try r.flag("video_signal_type_present_flag") {
            _ = try r.bits(3, "video_format")
            var colour = ColourDescription()
            colour.fullRange = try r.flag("video_full_range_flag")
            if try r.flag("colour_description_present_flag") {
                colour.primaries = Int(try r.bits(8, "colour_primaries"))
                colour.transfer = Int(try r.bits(8, "transfer_characteristics"))
                colour.matrix = Int(try r.bits(8, "matrix_coefficients"))
            }
            self.colour = colour
        }
        if try r.flag("chroma_loc_info_present_flag") {
            _ = try r.ue("chroma_sample_loc_type_top_field", max: 5)
            _ = try r.ue("chroma_sample_loc_type_bottom_field", max: 5)
        }
    }

    /// Table E-1 (both codecs): aspect_ratio_idc to sample aspect ratio.
    static let aspectRatios: [Int: (Int, Int)] = [
        1: (1, 1), 2: (12, 11), 3: (10, 11), 4: (16, 11), 5: (40, 33), 6: (24, 11), 7: (20, 11), 8: (32, 11),
        9: (80, 33), 10: (18, 11), 11: (15, 11), 12: (64, 33), 13: (160, 99), 14: (4, 3), 15: (3, 2), 16: (2, 1),
    ]
}
