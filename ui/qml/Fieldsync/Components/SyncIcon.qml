// A sync state's icon: the white glyph from resources/icons on a disc of the state's colour
// (in high contrast, the text colour or an outline). Always shown beside its words.
import QtQuick
import Fieldsync.Controls

Rectangle {
    id: disc
    property string kind: "pending"
    property int size: Theme.iconSize
    implicitWidth: size
    implicitHeight: size
    radius: size / 2
    color: Theme.highContrast ? (Theme.dark ? "transparent" : Theme.text) : Theme.syncColor(kind)
    border.width: Theme.highContrast && Theme.dark ? 2 : 0
    border.color: Theme.text
    Accessible.ignored: true
    Image {
        anchors.centerIn: parent
        source: Theme.syncIcon(disc.kind)
        sourceSize.width: Math.round(disc.size * 0.75)
        sourceSize.height: Math.round(disc.size * 0.75)
    }
}
