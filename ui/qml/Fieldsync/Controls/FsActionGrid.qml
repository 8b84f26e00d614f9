// A page's actions in equal columns: two on a phone, up to four on a wide window, so buttons
// line up instead of piling up. Children set Layout.fillWidth; `primary` ones span the row.
import QtQuick
import QtQuick.Layouts

GridLayout {
    id: grid
    property int maxColumns: 4
    columns: Math.max(1, Math.min(maxColumns, Math.floor((width + columnSpacing) / (150 + columnSpacing))))
    columnSpacing: Theme.spacingS
    rowSpacing: Theme.spacingS
    Layout.fillWidth: true
}
