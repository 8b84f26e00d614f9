// A work order's sync state as a coloured pill; white text on every colour, light or dark.
import QtQuick
import QtQuick.Controls

Rectangle {
    id: pill
    property string kind: "synced"
    property string text: ""
    implicitWidth: label.implicitWidth + 16
    implicitHeight: label.implicitHeight + 8
    radius: height / 2
    color: {
        switch (kind) {
        case "synced": return "#2e7d32"
        case "pending": return "#8a5a00"
        case "sending": return "#1565c0"
        case "retrying": return "#a03c00"
        case "conflict": return "#6a1b9a"
        case "review": return "#455a64"
        case "failed": return "#c62828"
        default: return "#616161"
        }
    }
    PlainLabel {
        id: label
        anchors.centerIn: parent
        text: pill.text
        color: "white"
        font.bold: true
        font.pointSize: Qt.application.font.pointSize * 0.9
    }
}
