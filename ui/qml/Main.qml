// The window: a phone column (list -> page -> back) below 900 px, two panes above.
import QtQuick
import QtQuick.Controls
import QtQuick.Layouts

ApplicationWindow {
    id: window
    objectName: "mainWindow"
    required property QtObject app
    readonly property bool wide: width >= 900
    width: 1280
    height: 800
    visible: true
    title: app.title + " — Fieldsync"
    color: palette.window

    header: ToolBar {
        objectName: "toolbar"
        RowLayout {
            anchors.fill: parent
            anchors.leftMargin: 4
            anchors.rightMargin: 4
            spacing: 4
            ToolButton {
                objectName: "backButton"
                text: "‹ Back"
                visible: window.app.canGoBack && !window.wide
                implicitHeight: 44
                onClicked: window.app.back()
            }
            PlainLabel {
                objectName: "pageTitle"
                text: window.wide && window.app.page === "list" ? "Fieldsync" : window.app.title
                font.bold: true
                font.pointSize: Qt.application.font.pointSize * 1.2
                elide: Text.ElideRight
                Layout.fillWidth: true
                Layout.leftMargin: 8
            }
            ToolButton {
                objectName: "newButton"
                text: "+ New"
                visible: window.wide || window.app.page === "list"
                implicitHeight: 44
                onClicked: window.app.newWorkOrder()
            }
            ToolButton {
                id: menuButton
                objectName: "menuButton"
                text: "☰"
                font.pointSize: Qt.application.font.pointSize * 1.4
                implicitHeight: 44
                implicitWidth: 48
                onClicked: pageMenu.open()
                Accessible.name: "Menu"
                Menu {
                    id: pageMenu
                    y: menuButton.height
                    MenuItem {
                        text: "Work orders"
                        implicitHeight: 44
                        onTriggered: window.app.open("list")
                    }
                    MenuItem {
                        objectName: "menuDead"
                        text: "Failed changes (" + window.app.status.failedCount + ")"
                        implicitHeight: 44
                        onTriggered: window.app.open("dead")
                    }
                    MenuItem {
                        objectName: "menuConflicts"
                        text: "Conflicts (" + window.app.status.conflictCount + ")"
                        implicitHeight: 44
                        onTriggered: window.app.open("conflict")
                    }
                    MenuItem {
                        objectName: "menuReview"
                        text: "Review inbox"
                        visible: window.app.review.available
                        height: visible ? implicitHeight : 0
                        implicitHeight: 44
                        onTriggered: window.app.open("review")
                    }
                    MenuItem {
                        objectName: "menuDiagnostics"
                        text: "Diagnostics"
                        implicitHeight: 44
                        onTriggered: window.app.open("diagnostics")
                    }
                    MenuItem {
                        objectName: "menuSettings"
                        text: "Settings"
                        implicitHeight: 44
                        onTriggered: window.app.open("settings")
                    }
                    MenuItem {
                        objectName: "menuSignIn"
                        text: "Sign in"
                        implicitHeight: 44
                        onTriggered: window.app.open("signin")
                    }
                }
            }
        }
    }

    footer: StatusBar {
        app: window.app
    }

    RowLayout {
        anchors.fill: parent
        spacing: 0

        WorkOrderList {
            objectName: "listPane"
            app: window.app
            visible: window.wide || window.app.page === "list"
            Layout.fillHeight: true
            Layout.fillWidth: !window.wide
            Layout.preferredWidth: window.wide ? Math.min(440, window.width * 0.4) : -1
        }
        Rectangle {
            visible: window.wide
            color: window.palette.mid
            Layout.fillHeight: true
            Layout.preferredWidth: 1
        }
        Loader {
            id: pageLoader
            objectName: "pageLoader"
            visible: window.wide || window.app.page !== "list"
            Layout.fillWidth: true
            Layout.fillHeight: true
            sourceComponent: {
                switch (window.app.page) {
                case "editor": return editorPage
                case "dead": return deadPage
                case "diagnostics": return diagnosticsPage
                case "signin": return signInPage
                case "conflict": return conflictPage
                case "review": return reviewPage
                case "settings": return settingsPage
                default: return window.wide ? placeholderPage : null
                }
            }
        }
    }

    Component { id: editorPage; EditorPage { app: window.app } }
    Component { id: deadPage; DeadLetterPage { app: window.app; wide: window.wide } }
    Component { id: diagnosticsPage; DiagnosticsPage { app: window.app } }
    Component { id: signInPage; SignInPage { app: window.app } }
    Component { id: conflictPage; ConflictPage { app: window.app; wide: window.wide } }
    Component { id: reviewPage; ReviewPage { app: window.app; wide: window.wide } }
    Component { id: settingsPage; SettingsPage { app: window.app } }
    Component {
        id: placeholderPage
        Pane {
            PlainLabel {
                anchors.centerIn: parent
                width: parent.width - 32
                horizontalAlignment: Text.AlignHCenter
                wrapMode: Text.WordWrap
                text: "Choose a work order on the left, or press “+ New”."
                color: window.palette.placeholderText
            }
        }
    }

    // A notice that never blocks a tap: a plain item (a Popup would swallow clicks under it).
    Rectangle {
        id: toast
        objectName: "toast"
        property string text: ""
        parent: window.contentItem
        z: 100
        visible: opacity > 0
        opacity: 0
        radius: 6
        color: window.palette.toolTipBase
        border.color: window.palette.mid
        width: Math.min(toastLabel.implicitWidth + 24, window.width - 32)
        height: toastLabel.implicitHeight + 16
        x: (window.width - width) / 2
        y: parent.height - height - 12
        PlainLabel {
            id: toastLabel
            objectName: "toastText"
            anchors.centerIn: parent
            width: parent.width - 24
            text: toast.text
            wrapMode: Text.WordWrap
            horizontalAlignment: Text.AlignHCenter
            color: window.palette.toolTipText
        }
        Behavior on opacity { NumberAnimation { duration: 150 } }
        Timer {
            id: toastTimer
            interval: 4000
            onTriggered: toast.opacity = 0
        }
        function show(message) {
            text = message
            opacity = 1
            toastTimer.restart()
        }
    }
    Connections {
        target: window.app
        function onMessage(text) { toast.show(text) }
    }
}
