// A single-line input, 48 px tall, on the theme's surface with a focus border.
import QtQuick
import QtQuick.Controls

TextField {
    id: control
    implicitHeight: Theme.controlHeight
    font.pixelSize: Theme.fontBody
    color: Theme.text
    placeholderTextColor: Theme.textMuted
    selectByMouse: true
    leftPadding: Theme.spacingM
    rightPadding: Theme.spacingM
    Accessible.name: placeholderText
    background: Rectangle {
        radius: Theme.radius
        color: Theme.surface
        border.width: control.activeFocus ? 2 : Theme.borderWidth
        border.color: control.activeFocus ? Theme.focus : Theme.divider
    }
}
