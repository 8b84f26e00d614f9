// A labelled date, picked from a calendar rather than typed: the field is a button showing the
// date ("Thu 31 Dec 2026"), a tap opens the month with ‹ › to move, a tap on a day picks it;
// "Clear" empties it. The value stays the contract's text (YYYY-MM-DD, "" for none).
import QtQuick
import QtQuick.Controls
import QtQuick.Layouts

ColumnLayout {
    id: field
    property alias label: caption.text
    property alias hint: caption.hint
    property string text: ""
    property alias inputName: input.objectName
    property alias error: errorText.text
    property alias errorName: errorText.objectName
    readonly property alias input: input
    readonly property bool valid: /^\d{4}-\d{2}-\d{2}$/.test(field.text)
    signal edited(string text)
    spacing: Theme.spacingXs

    function pad(n) { return (n < 10 ? "0" : "") + n }
    function iso(year, month, day) { return year + "-" + pad(month + 1) + "-" + pad(day) }
    function asDate(text) {
        const parts = text.split("-").map(Number)
        return new Date(parts[0], parts[1] - 1, parts[2])
    }
    function shown() {
        if (!field.text)
            return "No date"
        return field.valid ? Qt.formatDate(asDate(field.text), "ddd d MMM yyyy") : field.text
    }

    FsFieldLabel { id: caption }
    RowLayout {
        Layout.fillWidth: true
        spacing: Theme.spacingS
        FsButton {
            id: input
            text: field.shown()
            Accessible.name: field.label
            Accessible.description: field.error || (field.text ? text : "No date chosen")
            Layout.fillWidth: true
            onClicked: {
                const start = field.valid ? field.asDate(field.text) : new Date()
                grid.month = start.getMonth()
                grid.year = start.getFullYear()
                picker.open()
            }
        }
        FsButton {
            objectName: input.objectName + "Clear"
            visible: field.text !== ""
            text: "Clear"
            Accessible.name: "Clear " + field.label.toLowerCase()
            onClicked: field.edited("")
        }
    }
    ErrorLabel { id: errorText; Layout.fillWidth: true }

    Popup {
        id: picker
        objectName: input.objectName + "Picker"
        parent: Overlay.overlay
        modal: true
        focus: true
        x: Math.round((parent.width - width) / 2)
        y: Math.round((parent.height - height) / 2)
        width: Math.min(parent.width - 2 * Theme.spacingS, 7 * Theme.controlHeight + 2 * padding)
        padding: Theme.spacingS
        background: Rectangle {
            radius: Theme.radius
            color: Theme.surfaceRaised
            border.width: Theme.borderWidth
            border.color: Theme.divider
        }

        ColumnLayout {
            anchors.left: parent.left
            anchors.right: parent.right
            spacing: Theme.spacingXs
            RowLayout {
                Layout.fillWidth: true
                FsButton {
                    objectName: "previousMonthButton"
                    text: "‹"
                    Accessible.name: "Previous month"
                    onClicked: {
                        if (grid.month === 0) { grid.month = 11; grid.year -= 1 }
                        else grid.month -= 1
                    }
                }
                FsLabel {
                    objectName: "monthLabel"
                    text: Qt.formatDate(new Date(grid.year, grid.month, 1), "MMMM yyyy")
                    font.bold: true
                    horizontalAlignment: Text.AlignHCenter
                    Layout.fillWidth: true
                }
                FsButton {
                    objectName: "nextMonthButton"
                    text: "›"
                    Accessible.name: "Next month"
                    onClicked: {
                        if (grid.month === 11) { grid.month = 0; grid.year += 1 }
                        else grid.month += 1
                    }
                }
            }
            DayOfWeekRow {
                locale: grid.locale
                Layout.fillWidth: true
                delegate: FsCaption {
                    required property string shortName
                    text: shortName
                    horizontalAlignment: Text.AlignHCenter
                    Accessible.ignored: true
                }
            }
            MonthGrid {
                id: grid
                spacing: 0
                Layout.fillWidth: true
                Layout.preferredHeight: 6 * Theme.controlHeight
                delegate: FsButton {
                    required property var model
                    objectName: "day_" + field.iso(model.year, model.month, model.day)
                    visible: model.month === grid.month
                    text: String(model.day)
                    highlighted: field.text === field.iso(model.year, model.month, model.day)
                    // The grid shares the width out; a button's own 64 px would overflow it.
                    implicitWidth: Theme.controlHeight - Theme.spacingS
                    leftPadding: 0
                    rightPadding: 0
                    Accessible.name: Qt.formatDate(model.date, "d MMMM yyyy")
                    onClicked: {
                        field.edited(field.iso(model.year, model.month, model.day))
                        picker.close()
                    }
                }
            }
            FsButton {
                objectName: "closeDatePickerButton"
                text: "Cancel"
                Layout.fillWidth: true
                onClicked: picker.close()
            }
        }
    }
}
