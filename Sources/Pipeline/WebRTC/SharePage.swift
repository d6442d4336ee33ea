/// The share page served at `/` of the WHIP port (see SharePageRoutes): one self-contained document, shipped inside
/// the daemon, that fetches nothing from anywhere else (no CDN: it must work on an offline network, and the page
/// that captures a screen must not run anyone else's script). It sends a screen or a camera to a stream over WHIP
/// with the token the person types, and shows beside it the picture the daemon decoded from the stream's ring.
enum SharePage {
    /// SharePage.html beside this file, embedded in the binary at build time (Package.swift).
    static let html: [UInt8] = PackageResources.SharePage_html
}
