// One conflict: base / mine / server per field, choose per field or all at once, or ask an admin.
import QtQuick
import QtQuick.Controls
import QtQuick.Layouts

Pane {
    id: page
    objectName: "conflictPage"
    required property QtObject app
    property bool wide: false
    readonly property QtObject vm: app.conflicts
    padding: 0

    // Titles and values come from people: show them as text, never as markup.
    function escaped(value) {
        return String(value).replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;")
    }

    Flickable {
        id: flick
        anchors.fill: parent
        contentWidth: width
        contentHeight: column.implicitHeight + 32
        flickableDirection: Flickable.VerticalFlick
        boundsBehavior: Flickable.StopAtBounds
        clip: true
        ScrollBar.vertical: ScrollBar {}

        ColumnLayout {
            id: column
            x: 12
            y: 12
            width: flick.width - 24
            spacing: 8

            // No conflict chosen: the open ones.
            PlainLabel {
                visible: !page.vm.hasCurrent
                text: page.vm.openConflicts.length === 0 ? "No open conflicts." : "Open conflicts — choose one:"
                wrapMode: Text.WordWrap
                Layout.fillWidth: true
            }
            Repeater {
                model: page.vm.hasCurrent ? [] : page.vm.openConflicts
                delegate: ItemDelegate {
                    required property var modelData
                    required property int index
                    objectName: "conflictRow_" + index
                    Layout.fillWidth: true
                    implicitHeight: Math.max(56, rowText.implicitHeight + 16)
                    onClicked: page.vm.openJob(modelData.jobId)
                    contentItem: PlainLabel {
                        id: rowText
                        text: "<b>" + page.escaped(modelData.title) + "</b><br>" + page.escaped(modelData.text) + (modelData.waiting ? " (waiting for review)" : "")
                        textFormat: Text.StyledText
                        wrapMode: Text.WordWrap
                    }
                }
            }

            PlainLabel {
                visible: page.vm.hasCurrent
                objectName: "conflictTitle"
                text: page.vm.title
                font.bold: true
                font.pointSize: Qt.application.font.pointSize * 1.2
                wrapMode: Text.WordWrap
                Layout.fillWidth: true
            }
            PlainLabel {
                visible: page.vm.hasCurrent
                objectName: "conflictExplanation"
                text: page.vm.explanation
                wrapMode: Text.WordWrap
                Layout.fillWidth: true
            }

            Repeater {
                model: page.vm.fields
                delegate: Frame {
                    id: fieldFrame
                    required property var modelData
                    required property int index
                    objectName: "conflictField_" + modelData.name
                    Layout.fillWidth: true
                    ColumnLayout {
                        width: parent.width
                        spacing: 4
                        PlainLabel {
                            text: "<b>" + page.escaped(fieldFrame.modelData.label) + "</b> — " + page.escaped(fieldFrame.modelData.stateText)
                            textFormat: Text.StyledText
                            wrapMode: Text.WordWrap
                            Layout.fillWidth: true
                        }
                        GridLayout {
                            columns: page.wide ? 3 : 1
                            columnSpacing: 12
                            rowSpacing: 2
                            Layout.fillWidth: true
                            PlainLabel { Layout.alignment: Qt.AlignTop; text: "Before: " + fieldFrame.modelData.base; wrapMode: Text.Wrap; Layout.fillWidth: true; Layout.preferredWidth: 1 }
                            PlainLabel { Layout.alignment: Qt.AlignTop; text: "Mine: " + fieldFrame.modelData.mine; wrapMode: Text.Wrap; Layout.fillWidth: true; Layout.preferredWidth: 1; font.bold: fieldFrame.modelData.choice === "mine" }
                            PlainLabel { Layout.alignment: Qt.AlignTop; text: "Server: " + fieldFrame.modelData.server; wrapMode: Text.Wrap; Layout.fillWidth: true; Layout.preferredWidth: 1; font.bold: fieldFrame.modelData.choice === "theirs" }
                        }
                        RowLayout {
                            visible: fieldFrame.modelData.needsChoice
                            Layout.fillWidth: true
                            spacing: 8
                            Button {
                                objectName: "mine_" + fieldFrame.modelData.name
                                text: "Keep mine"
                                checkable: true
                                checked: fieldFrame.modelData.choice === "mine"
                                implicitHeight: 44
                                Layout.fillWidth: true
                                onClicked: page.vm.choose(fieldFrame.modelData.name, "mine")
                            }
                            Button {
                                objectName: "theirs_" + fieldFrame.modelData.name
                                text: "Take theirs"
                                checkable: true
                                checked: fieldFrame.modelData.choice === "theirs"
                                implicitHeight: 44
                                Layout.fillWidth: true
                                onClicked: page.vm.choose(fieldFrame.modelData.name, "theirs")
                            }
                        }
                    }
                }
            }

            Flow {
                visible: page.vm.hasCurrent && !page.vm.waitingForReview
                Layout.fillWidth: true
                spacing: 8
                Button {
                    objectName: "resolveButton"
                    text: page.vm.unresolvedCount > 0 ? "Choose " + page.vm.unresolvedCount + " more" : "Save my choices"
                    highlighted: true
                    enabled: page.vm.canResolve
                    implicitHeight: 44
                    onClicked: page.vm.resolve()
                }
                // These decide the whole conflict at once (the per-field buttons only choose):
                // they ask first.
                Button { objectName: "keepAllMineButton"; text: "Keep all mine"; implicitHeight: 44; onClicked: confirmAll.side = "mine" }
                Button { objectName: "takeAllTheirsButton"; text: "Take all theirs"; implicitHeight: 44; onClicked: confirmAll.side = "theirs" }
                Button { visible: page.vm.canRestore; text: "Restore it"; implicitHeight: 44; onClicked: page.vm.restore() }
                Button { objectName: "laterButton"; text: "Resolve later"; implicitHeight: 44; onClicked: page.vm.later() }
            }
            Frame {
                id: confirmAll
                objectName: "confirmAll"
                property string side: ""
                visible: side !== "" && page.vm.hasCurrent
                Layout.fillWidth: true
                ColumnLayout {
                    width: parent.width
                    PlainLabel {
                        text: confirmAll.side === "mine"
                              ? "Keep your values for every field? The server's changes to them are replaced."
                              : "Take the server's values for every field? Your edits to them are dropped."
                        wrapMode: Text.WordWrap
                        Layout.fillWidth: true
                    }
                    RowLayout {
                        Layout.fillWidth: true
                        Button {
                            objectName: "confirmAllButton"
                            text: confirmAll.side === "mine" ? "Keep all mine" : "Take all theirs"
                            implicitHeight: 44
                            Layout.fillWidth: true
                            onClicked: {
                                const side = confirmAll.side
                                confirmAll.side = ""
                                if (side === "mine")
                                    page.vm.keepAllMine()
                                else
                                    page.vm.takeAllTheirs()
                            }
                        }
                        Button {
                            text: "Cancel"
                            implicitHeight: 44
                            Layout.fillWidth: true
                            onClicked: confirmAll.side = ""
                        }
                    }
                }
            }
            RowLayout {
                visible: page.vm.hasCurrent && !page.vm.waitingForReview
                Layout.fillWidth: true
                spacing: 8
                TextField {
                    id: note
                    objectName: "adminNote"
                    placeholderText: "Note for the admin (optional)"
                    implicitHeight: 44
                    Layout.fillWidth: true
                    Layout.minimumWidth: 80
                }
                Button {
                    objectName: "sendToAdminButton"
                    text: "Send to admin"
                    implicitHeight: 44
                    onClicked: page.vm.sendToAdmin(note.text)
                }
            }
        }
    }
}
