// "Export pending changes…": the window's file dialog asks where, then the core writes every
// unsent change (and the failed ones) as one JSON file. The safety net, from the status sheet
// and from Diagnostics.
import QtQuick
import Fieldsync.Controls

FsButton {
    id: control
    required property QtObject app
    text: "Export pending changes…"
    enabled: !app.pendingExport.busy
    onClicked: app.pendingExport.chooseFile()
}
