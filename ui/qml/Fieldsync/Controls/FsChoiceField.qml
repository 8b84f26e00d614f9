// A labelled choice from a list: label, a ComboBox named after it, error.
import QtQuick
import QtQuick.Controls
import QtQuick.Layouts

ColumnLayout {
    id: field
    property alias label: caption.text
    property alias hint: caption.hint
    property alias choices: input.model
    property alias currentIndex: input.currentIndex
    property alias inputName: input.objectName
    property alias error: errorText.text
    property alias errorName: errorText.objectName
    readonly property alias input: input
    signal activated(int index)
    spacing: Theme.spacingXs

    FsFieldLabel { id: caption }
    FsComboBox {
        id: input
        Layout.fillWidth: true
        Accessible.name: field.label
        Accessible.description: displayText
        onActivated: (index) => field.activated(index)
    }
    ErrorLabel { id: errorText; Layout.fillWidth: true }
}
