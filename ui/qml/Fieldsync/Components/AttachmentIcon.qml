// A file's or photo's placeholder: the white glyph from resources/icons on a muted disc.
import QtQuick
import Fieldsync.Controls

Rectangle {
    id: disc
    property string name: "file"
    property int size: 48
    implicitWidth: size
    implicitHeight: size
    radius: size / 2
    color: Theme.highContrast ? (Theme.dark ? "transparent" : Theme.text) : Theme.textMuted
    border.width: Theme.highContrast && Theme.dark ? 2 : 0
    border.color: Theme.text
    Accessible.ignored: true
    Image {
        anchors.centerIn: parent
        source: Theme.icon(disc.name)
        sourceSize.width: Math.round(disc.size * 0.6)
        sourceSize.height: Math.round(disc.size * 0.6)
    }
}
