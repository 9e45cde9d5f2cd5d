public enum LiveDeliveryCoreModule {}
