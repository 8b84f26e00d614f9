// Multi-line input on the theme's surface; at least three lines tall.
import QtQuick
import QtQuick.Controls

TextArea {
    id: control
    font.pixelSize: Theme.fontBody
    color: Theme.text
    placeholderTextColor: Theme.textMuted
    wrapMode: TextEdit.Wrap
    selectByMouse: true
    padding: Theme.spacingM
    Accessible.name: placeholderText
    background: Rectangle {
        implicitHeight: Theme.controlHeight * 2.5
        radius: Theme.radius
        color: Theme.surface
        border.width: control.activeFocus ? 2 : Theme.borderWidth
        border.color: control.activeFocus ? Theme.focus : Theme.divider
    }
}
