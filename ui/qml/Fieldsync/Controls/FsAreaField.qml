// A labelled multi-line field (notes): label, input named after it, error.
import QtQuick
import QtQuick.Controls
import QtQuick.Layouts

ColumnLayout {
    id: field
    property alias label: caption.text
    property alias hint: caption.hint
    property alias text: input.text
    property alias placeholderText: input.placeholderText
    property alias inputName: input.objectName
    property alias error: errorText.text
    property alias errorName: errorText.objectName
    readonly property alias input: input
    signal edited(string text)
    spacing: Theme.spacingXs

    FsFieldLabel { id: caption }
    FsTextArea {
        id: input
        Layout.fillWidth: true
        Layout.preferredHeight: Math.max(120, implicitHeight)
        Accessible.name: field.label
        Accessible.description: field.error || field.hint
        // Only the person's typing, not a new record loaded into the box.
        onTextChanged: if (activeFocus) field.edited(text)
    }
    ErrorLabel { id: errorText; Layout.fillWidth: true }
}
