// A validation or failure message, red enough to notice on a light or a dark palette.
import QtQuick
import QtQuick.Controls

PlainLabel {
    wrapMode: Text.WordWrap
    visible: text !== ""
    color: palette.window.hslLightness < 0.5 ? "#ff8a80" : "#b00020"
}
