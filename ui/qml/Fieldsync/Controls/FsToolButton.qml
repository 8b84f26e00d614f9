// A header or toolbar button: at least 48 × 48 px, text or an icon from resources/icons.
// Give it `Accessible.name` when it shows only an icon.
import QtQuick
import QtQuick.Controls

ToolButton {
    id: control
    property string iconName: ""
    implicitHeight: Theme.controlHeight
    implicitWidth: Math.max(Theme.controlHeight, implicitContentWidth + leftPadding + rightPadding)
    font.pixelSize: Theme.fontBody
    icon.source: iconName ? Theme.icon(iconName) : ""
    icon.width: 24
    icon.height: 24
    icon.color: Theme.text
    display: iconName && !text ? AbstractButton.IconOnly : AbstractButton.TextBesideIcon
    Accessible.name: text
    background: Rectangle {
        implicitWidth: Theme.controlHeight
        implicitHeight: Theme.controlHeight
        radius: Theme.radius
        color: control.down || control.checked ? Theme.divider : "transparent"
        opacity: control.down ? 0.6 : 1
        border.width: control.visualFocus ? 2 : 0
        border.color: Theme.focus
    }
}
