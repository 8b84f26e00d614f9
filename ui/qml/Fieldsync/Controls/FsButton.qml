// A push button: 48 px tall, the accent colour when `highlighted` (the page's main action),
// a quiet outline otherwise. Its accessible name is its text unless a page says otherwise.
import QtQuick
import QtQuick.Controls

Button {
    id: control
    implicitHeight: Theme.controlHeight
    leftPadding: Theme.spacingL
    rightPadding: Theme.spacingL
    font.pixelSize: Theme.fontBody
    font.bold: highlighted
    Accessible.name: text

    contentItem: Text {
        text: control.text
        font: control.font
        color: !control.enabled ? (Theme.highContrast ? Theme.text : Theme.textDisabled)
               : control.highlighted ? Theme.accentText
               : control.checked ? Theme.accentText : Theme.controlText
        horizontalAlignment: Text.AlignHCenter
        verticalAlignment: Text.AlignVCenter
        wrapMode: Text.WordWrap
        maximumLineCount: 2
        elide: Text.ElideRight
    }
    background: Rectangle {
        implicitWidth: 64
        implicitHeight: Theme.controlHeight
        radius: Theme.radius
        // Disabled in high contrast: the window's colours, told apart by the faded outline.
        color: !control.enabled && Theme.highContrast ? Theme.control
               : control.highlighted || control.checked
               ? (control.enabled ? Theme.accent : Theme.divider)
               : control.down ? Theme.divider : Theme.control
        opacity: control.enabled ? (control.down ? 0.85 : 1) : 0.55
        border.width: control.visualFocus ? 2 : Theme.borderWidth
        border.color: control.visualFocus ? Theme.focus : Theme.divider
    }
}
