// A scrolling page: its children in one column with the theme's margins, capped near 720 px and
// centred on a wide window. `flick` and `column` are exposed for pages that scroll to an item.
import QtQuick
import QtQuick.Controls
import QtQuick.Layouts

Pane {
    id: page
    default property alias content: column.data
    property alias flick: flick
    property alias column: column
    property int maxWidth: Theme.maxContentWidth
    padding: 0
    background: Rectangle { color: Theme.window }

    Flickable {
        id: flick
        anchors.fill: parent
        contentWidth: width
        contentHeight: column.implicitHeight + 2 * Theme.pageMargin
        flickableDirection: Flickable.VerticalFlick
        boundsBehavior: Flickable.StopAtBounds
        clip: true
        ScrollBar.vertical: FsScrollBar { what: "the page" }

        ColumnLayout {
            id: column
            width: Math.min(flick.width - 2 * Theme.pageMargin, page.maxWidth)
            x: (flick.width - width) / 2
            y: Theme.pageMargin
            spacing: Theme.spacingS
        }
    }
}
