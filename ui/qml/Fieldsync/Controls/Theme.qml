// Design tokens for every screen: colours from the system palette (light, dark, high contrast),
// sync-state colours and icons, a type scale, spacing and sizes. Pages never style inline; the
// Fs* controls read this.
pragma Singleton
import QtQuick

QtObject {
    id: theme

    // The application palette (QGuiApplication::palette): the system's, or the dark or
    // high-contrast one ui/window.py applies. It follows palette changes at run time.
    readonly property SystemPalette palette: SystemPalette { colorGroup: SystemPalette.Active }
    readonly property SystemPalette disabledPalette: SystemPalette { colorGroup: SystemPalette.Disabled }

    readonly property bool dark: palette.window.hslLightness < 0.5
    // High contrast: the platform says so (Qt 6.10+), or the palette is black on white / white
    // on black (what a high-contrast desktop theme or `--high-contrast` sets).
    readonly property bool highContrast: {
        const hints = Qt.styleHints.accessibility
        if (hints && hints.contrastPreference === Qt.HighContrast)
            return true
        return Math.abs(palette.window.hslLightness - palette.windowText.hslLightness) > 0.97
    }

    // Surfaces and text.
    readonly property color window: palette.window
    readonly property color surface: palette.base
    readonly property color surfaceRaised: highContrast ? palette.window : palette.alternateBase
    readonly property color text: palette.windowText
    readonly property color textMuted: highContrast ? palette.windowText : palette.placeholderText
    readonly property color textDisabled: disabledPalette.windowText
    readonly property color divider: highContrast ? palette.windowText : palette.mid
    readonly property color accent: palette.highlight
    readonly property color accentText: palette.highlightedText
    // High contrast: the window's own pair (a dark high-contrast palette left buttonText
    // black on a black button).
    readonly property color control: highContrast ? palette.window : palette.button
    readonly property color controlText: highContrast ? palette.windowText : palette.buttonText
    readonly property color focus: highContrast ? palette.windowText : palette.highlight
    readonly property color error: highContrast ? (dark ? "#ffffff" : "#000000") : dark ? "#ff8a80" : "#b00020"
    readonly property color errorSurface: dark ? "#3b1d1d" : "#fdecea"
    readonly property color warningSurface: dark ? "#3a2e12" : "#fff4d6"

    // Sync states: one colour each, white text on it in light and dark (WCAG AA for 13 px
    // bold); in high contrast every state is drawn in the text colour and told by its icon
    // and word alone.
    function syncColor(kind) {
        if (highContrast)
            return palette.windowText
        switch (kind) {
        case "synced": return dark ? "#2f7d34" : "#2e7d32"
        case "pending": return dark ? "#8a5a00" : "#8a5a00"
        case "sending": return dark ? "#2f6fcf" : "#1565c0"
        case "retrying": return dark ? "#b04400" : "#a03c00"
        case "conflict": return dark ? "#7b3fa8" : "#6a1b9a"
        case "review": return dark ? "#56707d" : "#455a64"
        case "failed": return dark ? "#c8372e" : "#c62828"
        default: return dark ? "#6b6b6b" : "#616161"
        }
    }
    function syncTextColor(kind) {
        return highContrast ? palette.window : "#ffffff"
    }
    // What a device holds (issue 16): "Available offline", "Kept offline", "No longer
    // assigned to you"; white glyphs on these, like the sync states.
    function markColor(kind) {
        if (highContrast)
            return palette.windowText
        switch (kind) {
        case "away": return dark ? "#b04400" : "#a03c00"
        case "pinned": return dark ? "#2f6fcf" : "#1565c0"
        default: return dark ? "#2e7a70" : "#00695c"
        }
    }
    // Connectivity, for the status bar's icon: online, offline, degraded, signed_out, paused…
    function connectivityKind(connectivity) {
        switch (connectivity) {
        case "online": return "synced"
        case "offline": return "offline"
        case "degraded": return "retrying"
        case "unreachable": return "retrying"
        case "signed_out": return "failed"
        case "paused": return "pending"
        default: return "sending"
        }
    }
    // Icons shipped in resources/icons (ui/window.py sets fieldsyncIconDir).
    function syncIcon(kind) {
        const known = ["synced", "pending", "sending", "retrying", "conflict", "review", "failed", "offline"]
        return fieldsyncIconDir + "sync-" + (known.indexOf(kind) >= 0 ? kind : "pending") + ".svg"
    }
    function icon(name) {
        return fieldsyncIconDir + name + ".svg"
    }

    // Type scale, in pixels, following the person's font size setting.
    readonly property real fontScale: Math.max(1, Qt.application.font.pixelSize > 0
                                                    ? Qt.application.font.pixelSize / 13
                                                    : Qt.application.font.pointSize / 10)
    readonly property int fontCaption: Math.round(13 * fontScale)
    readonly property int fontBody: Math.round(15 * fontScale)
    readonly property int fontSubtitle: Math.round(17 * fontScale)
    readonly property int fontTitle: Math.round(20 * fontScale)
    readonly property string fontMono: "monospace"

    // Spacing and sizes.
    readonly property int spacingXs: 4
    readonly property int spacingS: 8
    readonly property int spacingM: 12
    readonly property int spacingL: 16
    readonly property int spacingXl: 24
    readonly property int pageMargin: 16
    readonly property int radius: 8
    readonly property int controlHeight: 48   // touch target
    readonly property int rowHeight: 56
    readonly property int iconSize: 20
    readonly property int maxContentWidth: 720
    readonly property int borderWidth: highContrast ? 2 : 1
}
