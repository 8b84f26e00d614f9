// A grouped block on a raised surface (a conflict's field, a confirmation); `tone` tints it:
// "" plain, "warning", "error".
import QtQuick
import QtQuick.Controls

Frame {
    id: card
    property string tone: ""
    padding: Theme.spacingM
    background: Rectangle {
        radius: Theme.radius
        color: card.tone === "error" ? Theme.errorSurface
               : card.tone === "warning" ? Theme.warningSurface : Theme.surfaceRaised
        border.width: Theme.borderWidth
        border.color: Theme.divider
    }
}
