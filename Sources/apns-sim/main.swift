print("apns-sim")
