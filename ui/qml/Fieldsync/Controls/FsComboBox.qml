// A choice from a list, 48 px tall; name it after the label it sits under.
import QtQuick
import QtQuick.Controls

ComboBox {
    id: control
    implicitHeight: Theme.controlHeight
    font.pixelSize: Theme.fontBody
    Accessible.name: displayText
    // A plain text, not Basic's read-only TextField: that one reached screen readers as an
    // unnamed editable field inside every box.
    contentItem: FsLabel {
        text: control.displayText
        leftPadding: Theme.spacingM
        rightPadding: control.indicator ? control.indicator.width + Theme.spacingXs : Theme.spacingXs
        verticalAlignment: Text.AlignVCenter
        elide: Text.ElideRight
        Accessible.ignored: true
    }
    background: Rectangle {
        implicitWidth: 120
        radius: Theme.radius
        color: control.down ? Theme.divider : Theme.control
        border.width: control.visualFocus ? 2 : Theme.borderWidth
        border.color: control.visualFocus ? Theme.focus : Theme.divider
    }
    delegate: ItemDelegate {
        required property var modelData
        required property int index
        width: ListView.view ? ListView.view.width : implicitWidth
        implicitHeight: Theme.controlHeight
        text: modelData
        font.pixelSize: Theme.fontBody
        highlighted: control.highlightedIndex === index
        Accessible.name: modelData
    }
}
