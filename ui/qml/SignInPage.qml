// Server address and device token; the token goes to the system keyring, never to disk here.
import QtQuick
import QtQuick.Controls
import QtQuick.Layouts

Pane {
    id: page
    objectName: "signInPage"
    required property QtObject app
    readonly property QtObject vm: app.signIn

    Flickable {
        id: flick
        anchors.fill: parent
        contentWidth: width
        contentHeight: column.implicitHeight + 16
        flickableDirection: Flickable.VerticalFlick
        boundsBehavior: Flickable.StopAtBounds
        clip: true

        ColumnLayout {
            id: column
            width: Math.min(flick.width, 560)
            x: (flick.width - width) / 2
            spacing: 8

            PlainLabel {
                objectName: "reasonLabel"
                visible: text !== ""
                text: page.vm.reason
                font.bold: true
                wrapMode: Text.WordWrap
                Layout.fillWidth: true
            }
            PlainLabel {
                text: "Sign in with the device token your administrator gave you. The token is kept in this computer's keyring."
                wrapMode: Text.WordWrap
                Layout.fillWidth: true
            }
            PlainLabel { text: "Server address"; font.bold: true }
            TextField {
                objectName: "serverField"
                text: page.vm.serverUrl
                placeholderText: "https://sync.example.org"
                inputMethodHints: Qt.ImhUrlCharactersOnly | Qt.ImhNoAutoUppercase
                implicitHeight: 44
                Layout.fillWidth: true
                onTextEdited: page.vm.serverUrl = text
            }
            PlainLabel { text: "Device token"; font.bold: true }
            TextField {
                objectName: "tokenField"
                echoMode: TextInput.Password
                placeholderText: "Paste the token"
                inputMethodHints: Qt.ImhSensitiveData | Qt.ImhNoPredictiveText
                implicitHeight: 44
                Layout.fillWidth: true
                onTextEdited: page.vm.setToken(text)
            }
            ErrorLabel {
                objectName: "signInError"
                text: page.vm.error
                Layout.fillWidth: true
            }
            Button {
                objectName: "signInButton"
                text: page.vm.busy ? "Signing in…" : "Sign in"
                highlighted: true
                enabled: page.vm.canSignIn
                implicitHeight: 44
                Layout.fillWidth: true
                onClicked: page.vm.signIn()
            }
        }
    }
}
