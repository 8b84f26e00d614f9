// A small mark beside a row's text: an icon from resources/icons on a disc and its words
// ("Available offline", "No longer assigned to you"): `label`, always shown.
import QtQuick
import QtQuick.Layouts

RowLayout {
    id: mark
    property string kind: "offline"
    property string iconName: "offline"
    property string label: ""
    property bool strong: false
    spacing: Theme.spacingXs
    Accessible.role: Accessible.StaticText
    Accessible.name: label
    Rectangle {
        implicitWidth: 16
        implicitHeight: 16
        radius: 8
        color: Theme.highContrast && Theme.dark ? "transparent" : Theme.markColor(mark.kind)
        border.width: Theme.highContrast && Theme.dark ? 2 : 0
        border.color: Theme.text
        Layout.alignment: Qt.AlignTop
        Layout.topMargin: 1
        Accessible.ignored: true
        Image {
            anchors.centerIn: parent
            source: Theme.icon(mark.iconName)
            sourceSize.width: 12
            sourceSize.height: 12
        }
    }
    FsLabel {
        text: mark.label
        color: mark.strong ? Theme.text : Theme.textMuted
        font.pixelSize: Theme.fontCaption
        font.bold: mark.strong
        wrapMode: Text.WordWrap
        Layout.fillWidth: true
        Accessible.ignored: true
    }
}
