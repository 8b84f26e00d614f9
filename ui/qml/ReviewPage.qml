// Admin review inbox: every device's escalated conflicts, newest first; decide per field or
// dismiss; past decisions with who made them and when.
import QtQuick
import QtQuick.Controls
import QtQuick.Layouts

Pane {
    id: page
    objectName: "reviewPage"
    required property QtObject app
    property bool wide: false
    readonly property QtObject vm: app.review
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

            PlainLabel {
                objectName: "reviewNotice"
                visible: text !== "" && !page.vm.hasCurrent
                text: page.vm.notice
                wrapMode: Text.WordWrap
                Layout.fillWidth: true
            }
            ErrorLabel {
                objectName: "reviewError"
                text: page.vm.error
                Layout.fillWidth: true
            }

            // The inbox.
            PlainLabel {
                visible: !page.vm.hasCurrent && page.vm.openConflicts.length > 0
                text: "Waiting for a decision (newest first)"
                font.bold: true
                Layout.fillWidth: true
            }
            Repeater {
                model: page.vm.hasCurrent ? [] : page.vm.openConflicts
                delegate: ItemDelegate {
                    required property var modelData
                    required property int index
                    objectName: "reviewRow_" + index
                    Layout.fillWidth: true
                    implicitHeight: Math.max(56, rowText.implicitHeight + 16)
                    onClicked: page.vm.openReview(modelData.reviewId)
                    contentItem: PlainLabel {
                        id: rowText
                        text: "<b>" + page.escaped(modelData.title) + "</b><br>" + page.escaped(modelData.text)
                              + (modelData.note ? "<br><i>" + page.escaped(modelData.note) + "</i>" : "")
                        textFormat: Text.StyledText
                        wrapMode: Text.WordWrap
                    }
                }
            }

            // One conflict: device's side and the server's, per field.
            PlainLabel {
                visible: page.vm.hasCurrent
                objectName: "reviewTitle"
                text: page.vm.title
                font.bold: true
                font.pointSize: Qt.application.font.pointSize * 1.2
                wrapMode: Text.WordWrap
                Layout.fillWidth: true
            }
            PlainLabel {
                visible: page.vm.hasCurrent
                objectName: "reviewExplanation"
                text: page.vm.explanation
                wrapMode: Text.WordWrap
                Layout.fillWidth: true
            }
            Repeater {
                model: page.vm.fields
                delegate: Frame {
                    id: fieldFrame
                    required property var modelData
                    objectName: "reviewField_" + modelData.name
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
                            columns: page.wide ? 2 : 1
                            columnSpacing: 12
                            rowSpacing: 2
                            Layout.fillWidth: true
                            PlainLabel { Layout.alignment: Qt.AlignTop; text: "Device: " + fieldFrame.modelData.mine; wrapMode: Text.Wrap; Layout.fillWidth: true; Layout.preferredWidth: 1; font.bold: fieldFrame.modelData.choice === "mine" }
                            PlainLabel { Layout.alignment: Qt.AlignTop; text: "Server: " + fieldFrame.modelData.server; wrapMode: Text.Wrap; Layout.fillWidth: true; Layout.preferredWidth: 1; font.bold: fieldFrame.modelData.choice === "theirs" }
                        }
                        RowLayout {
                            visible: fieldFrame.modelData.needsChoice
                            Layout.fillWidth: true
                            spacing: 8
                            Button {
                                objectName: "reviewMine_" + fieldFrame.modelData.name
                                text: "Device's"
                                checkable: true
                                checked: fieldFrame.modelData.choice === "mine"
                                implicitHeight: 44
                                Layout.fillWidth: true
                                onClicked: page.vm.choose(fieldFrame.modelData.name, "mine")
                            }
                            Button {
                                objectName: "reviewTheirs_" + fieldFrame.modelData.name
                                text: "Server's"
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
                visible: page.vm.hasCurrent
                Layout.fillWidth: true
                spacing: 8
                Button {
                    objectName: "reviewResolveButton"
                    text: page.vm.unresolvedCount > 0 ? "Choose " + page.vm.unresolvedCount + " more" : "Apply decision"
                    highlighted: true
                    enabled: page.vm.canResolve
                    implicitHeight: 44
                    onClicked: page.vm.resolve()
                }
                Button { objectName: "reviewAllMineButton"; text: "All device's"; implicitHeight: 44; onClicked: page.vm.keepAllMine() }
                Button { objectName: "reviewAllTheirsButton"; text: "All server's"; implicitHeight: 44; onClicked: page.vm.takeAllTheirs() }
                Button { objectName: "reviewDismissButton"; text: "Dismiss"; implicitHeight: 44; onClicked: page.vm.dismiss() }
                Button { objectName: "reviewCloseButton"; text: "Back to inbox"; implicitHeight: 44; onClicked: page.vm.close() }
            }

            // Past decisions.
            PlainLabel {
                visible: !page.vm.hasCurrent && page.vm.decisions.length > 0
                text: "Decided"
                font.bold: true
                Layout.topMargin: 8
                Layout.fillWidth: true
            }
            Repeater {
                model: page.vm.hasCurrent ? [] : page.vm.decisions
                delegate: PlainLabel {
                    required property var modelData
                    required property int index
                    objectName: "decision_" + index
                    text: "<b>" + page.escaped(modelData.title) + "</b><br>" + page.escaped(modelData.text)
                    textFormat: Text.StyledText
                    wrapMode: Text.WordWrap
                    Layout.fillWidth: true
                    Layout.bottomMargin: 4
                }
            }
            Button {
                objectName: "reviewRefreshButton"
                visible: !page.vm.hasCurrent
                text: page.vm.loading ? "Refreshing…" : "Refresh"
                enabled: !page.vm.loading
                implicitHeight: 44
                onClicked: page.vm.refresh()
            }
        }
    }
}
