// A labelled single-line field: the label a person sees, the input (whose accessible name is
// that label), and its error under it.
import QtQuick
import QtQuick.Controls
import QtQuick.Layouts

ColumnLayout {
    id: field
    property alias label: caption.text
    property alias hint: caption.hint
    property alias text: input.text
    property alias placeholderText: input.placeholderText
    property alias inputMethodHints: input.inputMethodHints
    property alias echoMode: input.echoMode
    property alias inputName: input.objectName
    property alias error: errorText.text
    property alias errorName: errorText.objectName
    readonly property alias input: input
    signal edited(string text)
    spacing: Theme.spacingXs

    FsFieldLabel { id: caption }
    FsTextField {
        id: input
        Layout.fillWidth: true
        Accessible.name: field.label
        Accessible.description: field.error || field.hint
        onTextEdited: field.edited(text)
    }
    ErrorLabel { id: errorText; Layout.fillWidth: true }
}
