enum APNsPlaceholder {}
