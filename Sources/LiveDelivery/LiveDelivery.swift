public enum LiveDeliveryModule {}
