// An on/off setting with its label; 48 px tall, the whole row toggles it. On: the accent track
// with the knob to the right, so it reads the same in light, dark and high contrast.
import QtQuick
import QtQuick.Controls

Switch {
    id: control
    implicitHeight: Theme.controlHeight
    font.pixelSize: Theme.fontBody
    spacing: Theme.spacingM
    Accessible.name: text
    indicator: Rectangle {
        implicitWidth: 44
        implicitHeight: 24
        x: control.leftPadding
        y: (control.height - height) / 2
        radius: height / 2
        color: control.checked ? Theme.accent : Theme.surface
        border.width: control.visualFocus ? 2 : Theme.borderWidth
        border.color: control.visualFocus ? Theme.focus : control.checked ? Theme.accent : Theme.divider
        Rectangle {
            width: 18
            height: 18
            radius: 9
            y: 3
            x: control.checked ? parent.width - width - 3 : 3
            color: control.checked ? (Theme.highContrast ? Theme.window : "#ffffff") : Theme.textMuted
        }
    }
    contentItem: FsLabel {
        text: control.text
        leftPadding: control.indicator.width + control.spacing
        verticalAlignment: Text.AlignVCenter
        wrapMode: Text.WordWrap
        Accessible.ignored: true
    }
}
